//! Persistence of runtime objects as JSON files, written atomically (temp file + rename).

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde::{Serialize, de::DeserializeOwned};

/// A directory of `<id>.json` records, e.g. `<root>/sandboxes`.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

impl Store {
    /// Opens (creating it if needed) the record directory `dir`.
    pub fn open(dir: PathBuf) -> anyhow::Result<Self> {
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(Self { dir })
    }

    fn path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    /// Writes `value` as `<id>.json`, replacing any previous version atomically.
    pub fn save<T: Serialize>(&self, id: &str, value: &T) -> anyhow::Result<()> {
        let data = serde_json::to_vec_pretty(value)?;
        write_atomic(&self.path(id), &data)
    }

    /// Deletes `<id>.json`; a missing file is not an error.
    pub fn delete(&self, id: &str) -> anyhow::Result<()> {
        remove_file_if_exists(&self.path(id))
    }

    /// Loads every record. Unreadable files are logged and skipped so that one corrupt
    /// record does not keep the runtime from starting.
    pub fn load_all<T: DeserializeOwned>(&self) -> anyhow::Result<Vec<T>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(&self.dir)? {
            let path = entry?.path();
            if path.extension().is_none_or(|ext| ext != "json") {
                continue;
            }
            match std::fs::read(&path)
                .map_err(anyhow::Error::from)
                .and_then(|data| Ok(serde_json::from_slice(&data)?))
            {
                Ok(value) => out.push(value),
                Err(err) => {
                    tracing::warn!(path = %path.display(), "skipping unreadable record: {err:#}")
                }
            }
        }
        Ok(out)
    }
}

/// Writes `data` to `path` through a temporary file in the same directory, fsynced and
/// renamed over the target, so readers see either the old or the new content.
pub fn write_atomic(path: &Path, data: &[u8]) -> anyhow::Result<()> {
    write_renamed(path, data, true)
}

/// Writes `data` to `path` through a temporary file renamed over the target, like
/// [`write_atomic`] but without fsync: for files of the volatile state directory (bundles,
/// shim records, namespace pins), which a crash of the runtime leaves in the page cache and
/// a reboot makes meaningless, so flushing them to disk would only slow every start.
pub fn write_volatile(path: &Path, data: &[u8]) -> anyhow::Result<()> {
    write_renamed(path, data, false)
}

/// Writes `data` to `.<name>.tmp` beside `path` (fsynced when `sync`), then renames it over
/// `path`.
fn write_renamed(path: &Path, data: &[u8], sync: bool) -> anyhow::Result<()> {
    use std::io::Write as _;
    let dir = path.parent().context("path has no parent directory")?;
    let name = path.file_name().context("path has no file name")?;
    let tmp = dir.join(format!(".{}.tmp", name.to_string_lossy()));
    let mut file =
        std::fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    file.write_all(data)
        .with_context(|| format!("writing {}", tmp.display()))?;
    if sync {
        file.sync_all()
            .with_context(|| format!("syncing {}", tmp.display()))?;
    }
    std::fs::rename(&tmp, path).with_context(|| format!("renaming onto {}", path.display()))?;
    Ok(())
}

/// Removes a file, treating "not found" as success.
pub fn remove_file_if_exists(path: &Path) -> anyhow::Result<()> {
    match std::fs::remove_file(path) {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
            Err(anyhow::Error::from(err).context(format!("removing {}", path.display())))
        }
        _ => Ok(()),
    }
}

/// Removes a directory tree, treating "not found" as success.
pub fn remove_dir_if_exists(path: &Path) -> anyhow::Result<()> {
    match std::fs::remove_dir_all(path) {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
            Err(anyhow::Error::from(err).context(format!("removing {}", path.display())))
        }
        _ => Ok(()),
    }
}

/// The subdirectories of `parent` whose name is not in `known`.
pub fn unknown_dirs(
    parent: &Path,
    known: &std::collections::HashSet<String>,
) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|entry| !known.contains(entry.file_name().to_string_lossy().as_ref()))
        .map(|entry| entry.path())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn save_load_delete_roundtrip() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("things")).unwrap();
        store.save("a", &vec![1, 2, 3]).unwrap();
        store.save("a", &vec![4]).unwrap();
        std::fs::write(dir.path().join("things/broken.json"), b"{").unwrap();
        let all: Vec<Vec<i32>> = store.load_all().unwrap();
        assert_eq!(all, vec![vec![4]]);
        store.delete("a").unwrap();
        store.delete("a").unwrap();
        assert!(!dir.path().join("things/a.json").exists());
    }

    #[test]
    fn unknown_dirs_are_directories_without_a_record() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["a", "b"] {
            std::fs::create_dir(dir.path().join(name)).unwrap();
        }
        std::fs::write(dir.path().join("c"), b"").unwrap();
        let known = std::collections::HashSet::from(["a".to_string()]);
        assert_eq!(unknown_dirs(dir.path(), &known), vec![dir.path().join("b")]);
        assert!(unknown_dirs(&dir.path().join("missing"), &known).is_empty());
    }
}
