//! Overlayfs snapshots keyed by chain ID (the role of containerd's overlayfs snapshotter).
//!
//! Layout under the snapshotter root (`<runtime root>/snapshots`):
//! - `<chain-id-hex>/fs`: one committed, read-only layer, unpacked once and shared by every
//!   image that has this chain of layers;
//! - `active/<key>/{upper,work}`: a writable snapshot (a container rootfs) on top of its
//!   image's layers, with `active/<key>/parents.json` naming those layers;
//! - `.tmp-*`: work in progress; renamed into place when complete, removed at startup.

mod apply;
pub(crate) mod atomic;
mod chain_id;
mod mount;

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Context, bail};

pub use apply::ApplyError;
use apply::apply_layer;
pub use chain_id::chain_ids;
pub(crate) use chain_id::sha256_hex;
pub use mount::{Mount, unmount};

/// Committed layers and active (writable) snapshots on overlayfs.
#[derive(Debug)]
pub struct Snapshotter {
    root: PathBuf,
    /// One lock per chain ID, so that concurrent pulls sharing a layer unpack it once.
    layer_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl Snapshotter {
    /// Opens (or creates) the snapshotter at `root` and discards interrupted work.
    pub fn new(root: &Path) -> anyhow::Result<Self> {
        let snapshotter = Self::attach(root)?;
        atomic::remove_temporaries(root)
            .with_context(|| format!("clean temporaries in {}", root.display()))?;
        Ok(snapshotter)
    }

    /// Opens (or creates) the snapshotter at `root` beside its owner (a running runtime):
    /// work in progress, its own or the owner's, is left alone.
    pub fn attach(root: &Path) -> anyhow::Result<Self> {
        let active = root.join("active");
        fs::create_dir_all(&active).with_context(|| format!("create {}", active.display()))?;
        Ok(Self {
            root: root.to_path_buf(),
            layer_locks: Mutex::new(HashMap::new()),
        })
    }

    /// The snapshotter root (`<runtime root>/snapshots`).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory holding the committed layer `chain_id` (`sha256:<hex>`):
    /// `<root>/<hex>/fs`. Errors if `chain_id` is not a sha256 digest.
    pub fn layer_dir(&self, chain_id: &str) -> io::Result<PathBuf> {
        Ok(self.layer_home(chain_id)?.join("fs"))
    }

    fn layer_home(&self, chain_id: &str) -> io::Result<PathBuf> {
        let hex = sha256_hex(chain_id).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("invalid chain ID {chain_id:?}"),
            )
        })?;
        Ok(self.root.join(hex))
    }

    /// Whether the layer `chain_id` is committed.
    pub fn has_layer(&self, chain_id: &str) -> bool {
        self.layer_dir(chain_id).is_ok_and(|dir| dir.is_dir())
    }

    /// Commits the layer `chain_id` by unpacking `blob` (whose uncompressed content must hash
    /// to `diff_id`), unless it is committed already.
    ///
    /// The layer is unpacked into a temporary directory and renamed into place only when
    /// complete and verified, so an interrupted unpack is never visible. Concurrent calls
    /// for the same chain ID wait for each other and unpack it once.
    pub async fn commit_layer(
        &self,
        chain_id: &str,
        diff_id: &str,
        blob: &Path,
    ) -> Result<(), ApplyError> {
        let home = self.layer_home(chain_id).map_err(|source| ApplyError::Io {
            context: "commit layer".to_string(),
            source,
        })?;
        let lock = {
            let mut locks = self
                .layer_locks
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            locks.entry(chain_id.to_string()).or_default().clone()
        };
        let _guard = lock.lock().await;
        if home.join("fs").is_dir() {
            return Ok(());
        }
        let temp = atomic::temp_path(&home);
        let blob = blob.to_path_buf();
        let diff_id = diff_id.to_string();
        let result = tokio::task::spawn_blocking(move || {
            let fs_dir = temp.join("fs");
            let unpacked = fs::create_dir_all(&fs_dir)
                .map_err(|source| ApplyError::Io {
                    context: format!("create {}", fs_dir.display()),
                    source,
                })
                .and_then(|()| apply_layer(&blob, &fs_dir, &diff_id))
                .and_then(|()| match fs::rename(&temp, &home) {
                    // An abandoned (cancelled) commit of the same layer finished first.
                    Err(_) if home.join("fs").is_dir() => Ok(()),
                    renamed => renamed.map_err(|source| ApplyError::Io {
                        context: format!("rename {} to {}", temp.display(), home.display()),
                        source,
                    }),
                });
            // Whatever is left under the temporary name (failure, or lost race) goes.
            let _ = fs::remove_dir_all(&temp);
            unpacked
        })
        .await;
        result.map_err(|join| ApplyError::Io {
            context: "unpack layer".to_string(),
            source: io::Error::other(join.to_string()),
        })?
    }

    /// Removes the committed layer `chain_id` (absent is fine). The caller makes sure no
    /// image or active snapshot still uses it.
    pub fn remove_layer(&self, chain_id: &str) -> io::Result<()> {
        let home = self.layer_home(chain_id)?;
        // Rename first so that a half-removed layer is never visible under its name.
        let doomed = atomic::temp_path(&home);
        match fs::rename(&home, &doomed) {
            Ok(()) => fs::remove_dir_all(&doomed),
            Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(err) => Err(err),
        }
    }

    /// Creates (or returns the existing) writable snapshot `key` on top of the committed
    /// layers `chain_ids` (bottom layer first, as in [`crate::image::ImageRecord::chain_ids`]).
    ///
    /// Idempotent for the same key and layers; errors if a layer is not committed, if `key`
    /// is not a plain file name, or if `key` exists with other layers. An image without
    /// layers gets an empty lower directory.
    pub fn prepare(&self, key: &str, chain_ids: &[String]) -> anyhow::Result<Mount> {
        let dir = self.active_dir(key)?;
        let mut lowerdirs = Vec::with_capacity(chain_ids.len().max(1));
        for chain_id in chain_ids.iter().rev() {
            let layer = self.layer_dir(chain_id)?;
            if !layer.is_dir() {
                bail!("snapshot {key}: layer {chain_id} is not unpacked");
            }
            lowerdirs.push(layer);
        }
        fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
        let parents_file = dir.join("parents.json");
        match fs::read(&parents_file) {
            Ok(existing) => {
                let existing: Vec<String> = serde_json::from_slice(&existing)
                    .with_context(|| format!("parse {}", parents_file.display()))?;
                if existing != chain_ids {
                    bail!("snapshot {key} already exists with other layers");
                }
            }
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                let data = serde_json::to_vec(chain_ids)?;
                atomic::write_atomic(&parents_file, &data)
                    .with_context(|| format!("write {}", parents_file.display()))?;
            }
            Err(err) => {
                return Err(err).with_context(|| format!("read {}", parents_file.display()));
            }
        }
        if lowerdirs.is_empty() {
            lowerdirs.push(dir.join("lower"));
        }
        let mount = Mount {
            lowerdirs,
            upperdir: self.upper_dir(key)?,
            workdir: dir.join("work"),
        };
        let empty_lower = chain_ids.is_empty().then(|| dir.join("lower"));
        for sub in [&mount.upperdir, &mount.workdir]
            .into_iter()
            .chain(empty_lower.as_ref())
        {
            fs::create_dir_all(sub).with_context(|| format!("create {}", sub.display()))?;
        }
        Ok(mount)
    }

    /// Removes the writable snapshot `key` (absent is fine). Unmount it first.
    pub fn remove(&self, key: &str) -> anyhow::Result<()> {
        let dir = self.active_dir(key)?;
        match fs::remove_dir_all(&dir) {
            Err(err) if err.kind() != io::ErrorKind::NotFound => {
                Err(err).with_context(|| format!("remove snapshot {}", dir.display()))
            }
            _ => Ok(()),
        }
    }

    /// Takes snapshot `key` out of use at once: renames it to a temporary name beside the
    /// layers (removed when the snapshotter opens, should its removal be cut short) and
    /// returns that path for the caller to delete when convenient. `None` when there is no
    /// such snapshot.
    pub fn detach(&self, key: &str) -> anyhow::Result<Option<PathBuf>> {
        let dir = self.active_dir(key)?;
        let doomed = atomic::temp_path(&self.root.join(key));
        match fs::rename(&dir, &doomed) {
            Ok(()) => Ok(Some(doomed)),
            Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(err) => Err(err).with_context(|| format!("detach snapshot {}", dir.display())),
        }
    }

    /// The writable (overlayfs upper) directory of snapshot `key`, whether or not it exists.
    pub fn upper_dir(&self, key: &str) -> anyhow::Result<PathBuf> {
        Ok(self.active_dir(key)?.join("upper"))
    }

    /// Chain IDs of the layers under any active snapshot (they must not be removed).
    pub fn active_layers(&self) -> anyhow::Result<HashSet<String>> {
        let active = self.root.join("active");
        let mut layers = HashSet::new();
        for entry in fs::read_dir(&active).with_context(|| format!("list {}", active.display()))? {
            let parents_file = entry?.path().join("parents.json");
            let data = match fs::read(&parents_file) {
                Ok(data) => data,
                Err(err) if err.kind() == io::ErrorKind::NotFound => continue,
                Err(err) => {
                    return Err(err).with_context(|| format!("read {}", parents_file.display()));
                }
            };
            let parents: Vec<String> = serde_json::from_slice(&data)
                .with_context(|| format!("parse {}", parents_file.display()))?;
            layers.extend(parents);
        }
        Ok(layers)
    }

    fn active_dir(&self, key: &str) -> anyhow::Result<PathBuf> {
        let plain = !key.is_empty()
            && key != "."
            && key != ".."
            && !key.contains('/')
            && !key.starts_with(atomic::TEMP_PREFIX);
        if !plain {
            bail!("invalid snapshot key {key:?}");
        }
        Ok(self.root.join("active").join(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer_blob(dir: &Path, name: &str, files: &[(&str, &[u8])]) -> (PathBuf, String) {
        let mut builder = tar::Builder::new(Vec::new());
        for (path, data) in files {
            let mut header = tar::Header::new_gnu();
            header.set_size(data.len() as u64);
            header.set_mode(0o644);
            header.set_uid(0);
            header.set_gid(0);
            header.set_mtime(1);
            header.set_path(path).expect("path");
            header.set_cksum();
            builder.append(&header, *data).expect("append");
        }
        let archive = builder.into_inner().expect("tar");
        let diff_id = format!(
            "sha256:{}",
            hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&archive))
        );
        let blob = dir.join(name);
        fs::write(&blob, archive).expect("write");
        (blob, diff_id)
    }

    #[tokio::test]
    async fn concurrent_commits_unpack_once_and_failures_stay_invisible() {
        let dir = tempfile::tempdir().expect("tempdir");
        let snapshots = Arc::new(Snapshotter::new(&dir.path().join("snapshots")).expect("new"));
        let (blob, diff_id) = layer_blob(dir.path(), "layer", &[("a", b"1")]);
        let tasks: Vec<_> = (0..4)
            .map(|_| {
                let snapshots = snapshots.clone();
                let (blob, diff_id) = (blob.clone(), diff_id.clone());
                tokio::spawn(async move { snapshots.commit_layer(&diff_id, &diff_id, &blob).await })
            })
            .collect();
        for task in tasks {
            task.await.expect("join").expect("commit");
        }
        assert!(snapshots.has_layer(&diff_id));
        let layer = snapshots.layer_dir(&diff_id).expect("dir");
        assert_eq!(fs::read(layer.join("a")).expect("read"), b"1");

        // A layer whose content does not match leaves nothing behind.
        let bogus = format!("sha256:{}", "1".repeat(64));
        let err = snapshots.commit_layer(&bogus, &bogus, &blob).await;
        assert!(matches!(err, Err(ApplyError::DiffIdMismatch { .. })));
        assert!(!snapshots.has_layer(&bogus));
        let names: Vec<_> = fs::read_dir(snapshots.root())
            .expect("list")
            .map(|entry| {
                entry
                    .expect("entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        assert!(
            names.iter().all(|name| !name.starts_with(".tmp-")),
            "{names:?}"
        );
    }

    #[test]
    fn detached_snapshots_are_gone_at_once_and_swept_on_open() {
        let dir = tempfile::tempdir().expect("tempdir");
        let snapshots = Snapshotter::new(dir.path()).expect("new");
        let mount = snapshots.prepare("c1", &[]).expect("prepare");
        fs::write(mount.upperdir.join("written"), b"x").expect("write");
        let doomed = snapshots.detach("c1").expect("detach").expect("was there");
        assert!(!snapshots.active_dir("c1").expect("dir").exists());
        assert!(
            doomed.join("upper/written").exists(),
            "renamed, not deleted yet"
        );
        assert_eq!(snapshots.detach("c1").expect("again"), None);
        assert!(snapshots.detach("../x").is_err());
        // A deletion cut short: the next open sweeps it.
        drop(snapshots);
        Snapshotter::new(dir.path()).expect("reopen");
        assert!(!doomed.exists());
    }

    #[test]
    fn prepare_is_idempotent_and_orders_lower_dirs_top_first() {
        let dir = tempfile::tempdir().expect("tempdir");
        let snapshots = Snapshotter::new(dir.path()).expect("new");
        let chain = [
            format!("sha256:{}", "a".repeat(64)),
            format!("sha256:{}", "b".repeat(64)),
        ];
        for chain_id in &chain {
            fs::create_dir_all(snapshots.layer_dir(chain_id).expect("dir")).expect("mkdir");
        }
        let mount = snapshots.prepare("c1", &chain).expect("prepare");
        assert_eq!(
            mount.lowerdirs[0],
            snapshots.layer_dir(&chain[1]).expect("dir")
        );
        assert_eq!(
            mount.lowerdirs[1],
            snapshots.layer_dir(&chain[0]).expect("dir")
        );
        assert!(mount.upperdir.is_dir() && mount.workdir.is_dir());
        assert_eq!(snapshots.prepare("c1", &chain).expect("again"), mount);
        assert!(snapshots.prepare("c1", &chain[..1]).is_err());
        assert!(snapshots.prepare("../x", &chain).is_err());
        assert!(
            snapshots
                .active_layers()
                .expect("active")
                .contains(&chain[1])
        );

        let empty = snapshots.prepare("c2", &[]).expect("no layers");
        assert_eq!(empty.lowerdirs.len(), 1);
        assert!(empty.lowerdirs[0].is_dir());

        snapshots.remove("c1").expect("remove");
        snapshots.remove("c1").expect("remove absent");
        assert!(!dir.path().join("active/c1").exists());
    }

    /// Needs root (mount(2)); skipped otherwise.
    #[test]
    fn overlay_mount_writes_to_the_upper_dir_and_unmounts_cleanly() {
        if !nix::unistd::Uid::effective().is_root() {
            eprintln!("skipped: needs root");
            return;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let snapshots = Snapshotter::new(&dir.path().join("snapshots")).expect("new");
        let chain_id = format!("sha256:{}", "c".repeat(64));
        let layer = snapshots.layer_dir(&chain_id).expect("dir");
        fs::create_dir_all(&layer).expect("mkdir");
        fs::write(layer.join("base"), b"lower").expect("write");

        let mount = snapshots.prepare("mounted", &[chain_id]).expect("prepare");
        let target = dir.path().join("rootfs");
        fs::create_dir(&target).expect("mkdir");
        mount.mount(&target).expect("mount");
        let written = fs::write(target.join("new"), b"upper");
        let read = fs::read(target.join("base"));
        unmount(&target).expect("unmount");
        written.expect("write through the overlay");
        assert_eq!(read.expect("read lower file"), b"lower");
        assert_eq!(
            fs::read(mount.upperdir.join("new")).expect("upper"),
            b"upper"
        );
        assert!(!layer.join("new").exists(), "lower layer untouched");

        unmount(&target).expect("unmount again is fine");
        let mounts = fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
        assert!(!mounts.contains(target.to_str().expect("utf-8")));
        snapshots.remove("mounted").expect("remove");
        assert!(!dir.path().join("snapshots/active/mounted").exists());
    }
}
