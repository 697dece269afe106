//! Image metadata: one JSON file per image under `<root>/images/<id-hex>.json`, written
//! atomically, plus an in-memory index for lookups by ID, tag and digest.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::RwLock;
use std::time::{Duration, SystemTime};

use super::ImageRecord;
use super::reference;
use crate::snapshot::{atomic, sha256_hex};

/// What is persisted for an image: the record and the blobs it owns.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct StoredImage {
    /// The image as the rest of the runtime sees it.
    #[serde(flatten)]
    pub record: ImageRecord,
    /// Digests of the config and layer blobs in the content store.
    pub blobs: Vec<String>,
}

/// The set of known images.
#[derive(Debug)]
pub struct MetadataStore {
    dir: PathBuf,
    images: RwLock<Loaded>,
}

/// The records by image ID, as of the directory's `stamp`.
#[derive(Debug)]
struct Loaded {
    stamp: Option<SystemTime>,
    images: HashMap<String, StoredImage>,
}

/// How long after a change a directory's mtime is trusted: file systems stamp with a
/// coarse clock, so two changes within one tick share an mtime.
const SETTLE: Duration = Duration::from_secs(1);

/// When `dir` last changed (a record was added, replaced or removed), or `None` when that
/// is unknown or too recent to tell later changes apart (then records are re-read).
fn stamp(dir: &Path) -> Option<SystemTime> {
    let modified = fs::metadata(dir).and_then(|meta| meta.modified()).ok()?;
    let age = SystemTime::now().duration_since(modified).ok()?;
    (age >= SETTLE).then_some(modified)
}

/// Every readable record under `dir`, by image ID.
fn read_records(dir: &Path) -> io::Result<HashMap<String, StoredImage>> {
    let mut images = HashMap::new();
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path
            .file_name()
            .is_some_and(|name| name.to_string_lossy().starts_with(atomic::TEMP_PREFIX))
        {
            continue;
        }
        let parsed = fs::read(&path)
            .map_err(|err| err.to_string())
            .and_then(|data| {
                serde_json::from_slice::<StoredImage>(&data).map_err(|err| err.to_string())
            });
        match parsed {
            Ok(stored) => {
                images.insert(stored.record.id.clone(), stored);
            }
            Err(err) => tracing::warn!(path = %path.display(), %err, "skipping image record"),
        }
    }
    Ok(images)
}

impl MetadataStore {
    /// Loads every image record under `dir` (created if missing); with `clean_leftovers`
    /// (the store's owner), removes half-written records first. Unreadable records are
    /// skipped with a warning rather than making the runtime unable to start.
    pub fn load(dir: &Path, clean_leftovers: bool) -> io::Result<Self> {
        fs::create_dir_all(dir)?;
        if clean_leftovers {
            atomic::remove_temporaries(dir)?;
        }
        let stamp = stamp(dir);
        Ok(Self {
            dir: dir.to_path_buf(),
            images: RwLock::new(Loaded {
                stamp,
                images: read_records(dir)?,
            }),
        })
    }

    /// Re-reads the records when the directory changed since they were read (another
    /// process, `skiff image import`, added or removed one). A failed re-read keeps what
    /// is known.
    fn refresh(&self) {
        let current = stamp(&self.dir);
        if current.is_some() && self.read().stamp == current {
            return;
        }
        let mut loaded = self.write();
        if current.is_some() && loaded.stamp == current {
            return;
        }
        match read_records(&self.dir) {
            Ok(images) => {
                *loaded = Loaded {
                    stamp: current,
                    images,
                }
            }
            Err(err) => tracing::warn!(dir = %self.dir.display(), %err, "re-reading image records"),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Loaded> {
        self.images
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Loaded> {
        self.images
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Finds an image by ID (`sha256:<hex>` or bare hex), normalized tag, repo digest or
    /// anything that normalizes to one (`busybox` -> `docker.io/library/busybox:latest`).
    pub fn get(&self, image_ref_or_id: &str) -> Option<StoredImage> {
        self.refresh();
        let loaded = self.read();
        let images = &loaded.images;
        let id = if sha256_hex(image_ref_or_id).is_some() {
            Some(image_ref_or_id.to_string())
        } else {
            sha256_hex(&format!("sha256:{image_ref_or_id}")).map(|hex| format!("sha256:{hex}"))
        };
        if let Some(found) = id.and_then(|id| images.get(&id)) {
            return Some(found.clone());
        }
        let parsed = reference::normalize(image_ref_or_id).ok()?;
        if let Some(digest) = reference::digest(&parsed) {
            return images
                .values()
                .find(|image| image.record.repo_digests.contains(&digest))
                .cloned();
        }
        let tag = reference::tag(&parsed)?;
        images
            .values()
            .find(|image| image.record.repo_tags.contains(&tag))
            .cloned()
    }

    /// All images.
    pub fn list(&self) -> Vec<StoredImage> {
        self.refresh();
        self.read().images.values().cloned().collect()
    }

    /// Records `image` (merging tags and digests into an existing record of the same ID).
    /// Its tags move away from any other image that had them, as a tag names one image.
    pub fn put(&self, mut image: StoredImage) -> io::Result<ImageRecord> {
        self.refresh();
        let mut loaded = self.write();
        let images = &mut loaded.images;
        if let Some(existing) = images.get(&image.record.id) {
            merge(&mut image.record.repo_tags, &existing.record.repo_tags);
            merge(
                &mut image.record.repo_digests,
                &existing.record.repo_digests,
            );
        }
        let mut untagged = Vec::new();
        for (id, other) in images.iter() {
            if *id == image.record.id {
                continue;
            }
            let mut other = other.clone();
            let before = other.record.repo_tags.len();
            other
                .record
                .repo_tags
                .retain(|tag| !image.record.repo_tags.contains(tag));
            if other.record.repo_tags.len() != before {
                untagged.push(other);
            }
        }
        self.persist(&image)?;
        for other in untagged {
            self.persist(&other)?;
            images.insert(other.record.id.clone(), other);
        }
        let record = image.record.clone();
        images.insert(record.id.clone(), image);
        Ok(record)
    }

    /// Forgets the image `id` (absent is fine) and returns what it was.
    pub fn remove(&self, id: &str) -> io::Result<Option<StoredImage>> {
        self.refresh();
        let mut loaded = self.write();
        let images = &mut loaded.images;
        let Some(path) = self.path(id) else {
            return Ok(None);
        };
        match fs::remove_file(&path) {
            Err(err) if err.kind() != io::ErrorKind::NotFound => return Err(err),
            _ => {}
        }
        Ok(images.remove(id))
    }

    fn path(&self, id: &str) -> Option<PathBuf> {
        sha256_hex(id).map(|hex| self.dir.join(format!("{hex}.json")))
    }

    fn persist(&self, image: &StoredImage) -> io::Result<()> {
        let path = self.path(&image.record.id).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("invalid image ID {:?}", image.record.id),
            )
        })?;
        let data = serde_json::to_vec_pretty(image)?;
        atomic::write_atomic(&path, &data)
    }
}

fn merge(into: &mut Vec<String>, from: &[String]) {
    for item in from {
        if !into.contains(item) {
            into.push(item.clone());
        }
    }
}

/// Chain IDs and blobs used by any of `images`.
pub fn referenced(images: &[StoredImage]) -> (HashSet<String>, HashSet<String>) {
    let chain_ids = images
        .iter()
        .flat_map(|image| image.record.chain_ids.iter().cloned())
        .collect();
    let blobs = images
        .iter()
        .flat_map(|image| image.blobs.iter().cloned())
        .collect();
    (chain_ids, blobs)
}
