//! Pulling an image: manifest -> config -> layers (downloaded and unpacked into snapshots)
//! -> image record, the record being written last so an interrupted pull leaves no image.

use futures::{StreamExt, TryStreamExt};
use k8s_cri::v1::AuthConfig;
use oci_client::manifest::OciDescriptor;
use oci_spec::image::ImageConfiguration;

use super::registry::Registry;
use super::store::StoredImage;
use super::{Error, ImageManager, ImageRecord, reference};
use crate::snapshot::{chain_ids, sha256_hex};

/// Layers downloaded and unpacked at the same time by one pull.
const MAX_CONCURRENT_LAYERS: usize = 3;

impl ImageManager {
    /// Pulls `image` (any reference Docker accepts; see [`ImageManager::get`]) from its
    /// registry with the CRI credentials `auth`, unpacks its layers and records it.
    ///
    /// Blobs and layers already present are reused. Concurrent pulls sharing layers are
    /// safe. Errors say which image and what failed (see [`Error`] for the kinds).
    pub async fn pull(&self, image: &str, auth: Option<&AuthConfig>) -> Result<ImageRecord, Error> {
        let parsed = reference::normalize(image)?;
        let name = reference::tag(&parsed)
            .or_else(|| reference::digest(&parsed))
            .unwrap_or_else(|| image.to_string());
        let mut registry = Registry::connect(&parsed, auth, &name, &self.pull)?;
        let resolved = registry.resolve().await?;
        let manifest = &resolved.manifest;
        let invalid = |detail: String| Error::InvalidContent {
            image: name.clone(),
            detail,
        };

        let config_digest = manifest.config.digest.as_str();
        {
            let _claim = self.inflight.claim(config_digest).await;
            registry.fetch_blob(&self.content, &manifest.config).await?;
        }
        let config_json = self
            .content
            .read(config_digest)
            .map_err(|err| registry.content_error(config_digest, err))?;
        let config: ImageConfiguration = serde_json::from_slice(&config_json)
            .map_err(|err| invalid(format!("image config {config_digest}: {err}")))?;
        let diff_ids = config.rootfs().diff_ids().clone();
        check_layers(&manifest.layers, &diff_ids).map_err(invalid)?;
        let chain = chain_ids(&diff_ids);

        let mut blobs = vec![config_digest.to_string()];
        blobs.extend(manifest.layers.iter().map(|layer| layer.digest.clone()));
        let _lease = self
            .leases
            .acquire(blobs.iter().chain(&chain).cloned().collect());
        // Collected first: a lazy `map` here trips the `Send` check of the async trait.
        let mut jobs = Vec::with_capacity(chain.len());
        for ((layer, diff_id), chain_id) in manifest.layers.iter().zip(&diff_ids).zip(&chain) {
            jobs.push(self.unpack_layer(&registry, &name, layer, diff_id, chain_id));
        }
        futures::stream::iter(jobs)
            .buffer_unordered(MAX_CONCURRENT_LAYERS)
            .try_collect::<Vec<()>>()
            .await?;

        let record = ImageRecord {
            id: config_digest.to_string(),
            repo_tags: reference::tag(&parsed).into_iter().collect(),
            repo_digests: vec![format!(
                "{}@{}",
                reference::repository(&parsed),
                resolved.digest
            )],
            chain_ids: chain,
            size: manifest
                .layers
                .iter()
                .map(|layer| u64::try_from(layer.size).unwrap_or(0))
                .sum(),
            config,
        };
        let record = self
            .images
            .put(StoredImage { record, blobs })
            .map_err(|source| Error::Io {
                image: name.clone(),
                context: "write image record".to_string(),
                source,
            })?;
        tracing::info!(image = %name, id = %record.id, "pulled image");
        Ok(record)
    }

    /// Makes sure the layer `chain_id` is unpacked, downloading its blob if needed. A pull
    /// that needs a layer another pull is fetching waits for it instead of downloading it
    /// again.
    async fn unpack_layer(
        &self,
        registry: &Registry,
        image: &str,
        layer: &OciDescriptor,
        diff_id: &str,
        chain_id: &str,
    ) -> Result<(), Error> {
        if self.snapshotter.has_layer(chain_id) {
            return Ok(());
        }
        let _claim = self.inflight.claim(&layer.digest).await;
        if self.snapshotter.has_layer(chain_id) {
            return Ok(());
        }
        let blob = registry.fetch_blob(&self.content, layer).await?;
        self.snapshotter
            .commit_layer(chain_id, diff_id, &blob)
            .await
            .map_err(|source| Error::Layer {
                image: image.to_string(),
                digest: layer.digest.clone(),
                source,
            })
    }
}

/// Checks that the manifest's layers are tar layers (plain, gzip or zstd; Docker or OCI
/// media types) matching the config's diff IDs one to one.
pub(super) fn check_layers(layers: &[OciDescriptor], diff_ids: &[String]) -> Result<(), String> {
    if layers.len() != diff_ids.len() {
        return Err(format!(
            "manifest has {} layers but the config has {} diff IDs",
            layers.len(),
            diff_ids.len()
        ));
    }
    for layer in layers {
        let media_type = layer.media_type.as_str();
        let tar_layer = media_type.starts_with("application/vnd.oci.image.layer.")
            || media_type.starts_with("application/vnd.docker.image.rootfs.");
        if !tar_layer || media_type.contains("encrypted") {
            return Err(format!(
                "layer {} has unsupported media type {media_type}",
                layer.digest
            ));
        }
    }
    if let Some(bad) = diff_ids.iter().find(|id| sha256_hex(id).is_none()) {
        return Err(format!(
            "unsupported diff ID {bad:?} (only sha256 is supported)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(media_type: &str) -> OciDescriptor {
        OciDescriptor {
            media_type: media_type.to_string(),
            digest: format!("sha256:{}", "a".repeat(64)),
            ..Default::default()
        }
    }

    #[test]
    fn accepts_docker_and_oci_tar_layers_only() {
        let diff = vec![format!("sha256:{}", "b".repeat(64))];
        for ok in [
            "application/vnd.oci.image.layer.v1.tar",
            "application/vnd.oci.image.layer.v1.tar+gzip",
            "application/vnd.oci.image.layer.v1.tar+zstd",
            "application/vnd.docker.image.rootfs.diff.tar.gzip",
        ] {
            assert_eq!(check_layers(&[layer(ok)], &diff), Ok(()), "{ok}");
        }
        assert!(
            check_layers(
                &[layer("application/vnd.wasm.content.layer.v1+wasm")],
                &diff
            )
            .is_err()
        );
        assert!(
            check_layers(
                &[layer(
                    "application/vnd.oci.image.layer.v1.tar+gzip+encrypted"
                )],
                &diff
            )
            .is_err()
        );
        assert!(check_layers(&[], &diff).is_err());
        assert!(
            check_layers(
                &[layer("application/vnd.oci.image.layer.v1.tar")],
                &["md5:x".into()]
            )
            .is_err()
        );
    }
}
