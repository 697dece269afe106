//! Images: content store, pull, metadata (the roles of containerd's content store, image
//! service and CRI image plugin).
//!
//! Layout under the runtime root: `content/blobs/sha256/<hex>` (blobs), `images/<id-hex>.json`
//! (one record per image), `snapshots/` (see [`crate::snapshot`]), `import/` (archives
//! being imported).

mod archive;
mod content;
mod error;
mod import;
mod inflight;
mod lease;
mod progress;
mod pull;
mod reference;
mod registry;
mod store;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;

pub use error::Error;

use crate::config::{RegistryHost, RuntimeConfig};
use crate::snapshot::Snapshotter;
use content::ContentStore;
use inflight::InFlight;
use lease::Leases;
use store::MetadataStore;

/// What the rest of the runtime needs to know about a stored image.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ImageRecord {
    /// Image ID: the config blob digest, `sha256:<hex>`.
    pub id: String,
    /// Normalized references, e.g. `127.0.0.1:5000/busybox:latest`.
    pub repo_tags: Vec<String>,
    /// `<repository>@sha256:<digest>` of what the reference resolved to (the image index
    /// when there is one, else the manifest), as containerd records repo digests.
    pub repo_digests: Vec<String>,
    /// Chain IDs of the layers, bottom layer first (OCI image spec, "ChainID").
    pub chain_ids: Vec<String>,
    /// Sum of the compressed layer sizes, bytes.
    pub size: u64,
    /// The image configuration (Entrypoint, Cmd, Env, WorkingDir, User, StopSignal, Volumes).
    pub config: oci_spec::image::ImageConfiguration,
}

/// Stores images under `<root>/content` (blobs) and `<root>/images` (metadata), with their
/// layers unpacked under `<root>/snapshots`.
#[derive(Debug)]
pub struct ImageManager {
    content: ContentStore,
    images: MetadataStore,
    snapshotter: Snapshotter,
    leases: Leases,
    /// Blobs being downloaded, so that concurrent pulls fetch a shared blob once.
    inflight: InFlight,
    pull: PullSettings,
    /// Where archives are unpacked while imported (`<root>/import`).
    scratch: PathBuf,
}

/// What pulls take from the [`RuntimeConfig`].
#[derive(Debug, Clone)]
pub struct PullSettings {
    /// Mirrors, plain-HTTP hosts and default credentials, by registry host.
    pub registries: BTreeMap<String, RegistryHost>,
    /// A pull that receives nothing for this long fails with [`Error::NoProgress`].
    pub progress_timeout: Duration,
}

impl ImageManager {
    /// Opens (or creates) the image store under `config.root`, dropping leftovers of
    /// interrupted pulls (partial blobs, half-unpacked layers). Pulls use the configured
    /// `registries` and `pull_progress_timeout`.
    pub fn new(config: &RuntimeConfig) -> anyhow::Result<Self> {
        Self::open(config, true)
    }

    /// Opens (or creates) the image store under `config.root` beside the runtime that owns
    /// it, which may be running: nothing in progress is touched. For tools such as
    /// `skiff image import`; the runtime sees the images they add (see [`ImageManager::get`]).
    pub fn attach(config: &RuntimeConfig) -> anyhow::Result<Self> {
        Self::open(config, false)
    }

    fn open(config: &RuntimeConfig, owner: bool) -> anyhow::Result<Self> {
        let root = &config.root;
        let dir = |name: &str| -> PathBuf { root.join(name) };
        let content = ContentStore::new(&dir("content"), owner)
            .with_context(|| format!("open content store {}", dir("content").display()))?;
        let images = MetadataStore::load(&dir("images"), owner)
            .with_context(|| format!("load image records {}", dir("images").display()))?;
        let scratch = dir("import");
        if owner && scratch.is_dir() {
            crate::snapshot::atomic::remove_temporaries(&scratch)
                .with_context(|| format!("clean {}", scratch.display()))?;
        }
        let snapshotter = if owner {
            Snapshotter::new(&dir("snapshots"))?
        } else {
            Snapshotter::attach(&dir("snapshots"))?
        };
        Ok(Self {
            content,
            images,
            snapshotter,
            leases: Leases::default(),
            inflight: InFlight::default(),
            pull: PullSettings {
                registries: config.registries.clone(),
                progress_timeout: config.pull_progress_timeout,
            },
            scratch,
        })
    }

    /// Finds an image by ID (`sha256:...`), normalized tag, repo digest, or a short name
    /// (`busybox` finds `docker.io/library/busybox:latest`). Lookups and [`list`](Self::list)
    /// re-read the records when another process (`skiff image import`) changed them.
    pub fn get(&self, image_ref_or_id: &str) -> Option<ImageRecord> {
        self.images.get(image_ref_or_id).map(|stored| stored.record)
    }

    /// All images.
    pub fn list(&self) -> Vec<ImageRecord> {
        self.images
            .list()
            .into_iter()
            .map(|stored| stored.record)
            .collect()
    }

    /// Removes an image (all its tags) and the layers and blobs no other image, active
    /// snapshot or ongoing pull uses. An absent image is not an error.
    pub fn remove(&self, image_ref_or_id: &str) -> Result<(), Error> {
        let Some(image) = self.images.get(image_ref_or_id) else {
            return Ok(());
        };
        let io = |context: &str| {
            let context = context.to_string();
            let image = image_ref_or_id.to_string();
            move |source| Error::Io {
                image,
                context,
                source,
            }
        };
        self.images
            .remove(&image.record.id)
            .map_err(io("remove image record"))?;
        // Holding the lease table keeps pulls from claiming what is being deleted.
        let leased = self.leases.lock();
        let (mut layers, blobs) = store::referenced(&self.images.list());
        let active = self.snapshotter.active_layers().map_err(|err| {
            io("list active snapshots")(std::io::Error::other(format!("{err:#}")))
        })?;
        layers.extend(active);
        for chain_id in &image.record.chain_ids {
            if !layers.contains(chain_id) && !leased.contains_key(chain_id) {
                self.snapshotter
                    .remove_layer(chain_id)
                    .map_err(io("remove layer snapshot"))?;
            }
        }
        for digest in &image.blobs {
            if !blobs.contains(digest) && !leased.contains_key(digest) {
                self.content.remove(digest).map_err(|err| Error::Io {
                    image: image_ref_or_id.to_string(),
                    context: format!("remove blob {digest}"),
                    source: std::io::Error::other(err.to_string()),
                })?;
            }
        }
        Ok(())
    }

    /// The snapshotter holding the unpacked layers and the containers' writable snapshots.
    pub fn snapshotter(&self) -> &Snapshotter {
        &self.snapshotter
    }
}
