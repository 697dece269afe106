//! Atomic updates of a volume of projected files (upstream `pkg/volume/util/atomic_writer.go`).
//!
//! Layout of the target directory, as upstream, so that readers always see one whole
//! version:
//!
//! ```text
//! ..2024_05_01_10_00_00.123456789/   the current version (mode 0755), files with their modes
//! ..data -> ..2024_05_01_10_00_00.123456789
//! labels -> ..data/labels            one symlink per top-level name of the payload
//! ```
//!
//! A new version is written to a new timestamped directory, `..data` is switched to it
//! with one rename, then user-visible links are added or removed and the old version is
//! deleted.

use crate::error::{Error, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Component, Path, PathBuf};

/// The symlink to the current version.
const DATA_DIR_NAME: &str = "..data";
/// The symlink renamed over [`DATA_DIR_NAME`].
const NEW_DATA_DIR_NAME: &str = "..data_tmp";
/// Longest payload path, and longest path component (upstream limits).
const MAX_PATH_LENGTH: usize = 4096;
const MAX_FILE_NAME_LENGTH: usize = 255;

/// One file of a payload: its content and permission bits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileProjection {
    /// File content.
    pub data: Vec<u8>,
    /// Permission bits, e.g. 0o644.
    pub mode: u32,
}

/// Writes payloads into `target_dir` (upstream `AtomicWriter`).
pub struct AtomicWriter {
    target_dir: PathBuf,
}

/// Errors unless `path` is relative, without `..` components, not starting with `..`,
/// and within upstream's length limits (upstream `validatePath`).
fn validate_path(path: &str) -> Result<()> {
    if path.is_empty() {
        return Err(Error::Volume("invalid path: must not be empty".to_owned()));
    }
    if path.len() > MAX_PATH_LENGTH {
        return Err(Error::Volume(format!(
            "invalid path: must be less than or equal to {MAX_PATH_LENGTH} characters"
        )));
    }
    let p = Path::new(path);
    if p.is_absolute() {
        return Err(Error::Volume(format!(
            "invalid path: must be relative path: {path}"
        )));
    }
    if p.components().any(|c| c == Component::ParentDir) {
        return Err(Error::Volume(format!(
            "invalid path: must not contain '..': {path}"
        )));
    }
    if path.starts_with("..") {
        return Err(Error::Volume(format!(
            "invalid path: must not start with '..': {path}"
        )));
    }
    if p.components()
        .any(|c| c.as_os_str().len() > MAX_FILE_NAME_LENGTH)
    {
        return Err(Error::Volume(format!(
            "invalid path: each path element must be less than or equal to {MAX_FILE_NAME_LENGTH} characters"
        )));
    }
    Ok(())
}

/// The first component of a payload path (the user-visible name in the target dir).
fn top_level(path: &str) -> String {
    Path::new(path)
        .components()
        .find_map(|c| match c {
            Component::Normal(n) => Some(n.to_string_lossy().into_owned()),
            _ => None,
        })
        .unwrap_or_default()
}

impl AtomicWriter {
    /// A writer for `target_dir`, which must exist.
    pub fn new(target_dir: impl Into<PathBuf>) -> Self {
        Self {
            target_dir: target_dir.into(),
        }
    }

    /// Makes the target directory hold exactly `payload` (relative path to file). Does
    /// nothing when the current version already has the same files, contents and modes.
    /// Errors on an invalid path or any I/O failure; a failed write leaves the previous
    /// version in place.
    pub fn write(&self, payload: &BTreeMap<String, FileProjection>) -> Result<()> {
        for path in payload.keys() {
            validate_path(path)?;
        }
        let data_link = self.target_dir.join(DATA_DIR_NAME);
        let old_version = std::fs::read_link(&data_link).ok();
        if let Some(old) = &old_version
            && self.current_payload(&self.target_dir.join(old)) == Some(payload.clone())
        {
            return Ok(());
        }
        let new_version = self.new_version_dir()?;
        let written = self
            .write_payload(&self.target_dir.join(&new_version), payload)
            .and_then(|()| self.switch_data_link(&new_version));
        if let Err(e) = written {
            let _ = std::fs::remove_dir_all(self.target_dir.join(&new_version));
            return Err(e);
        }
        let old_names: BTreeSet<String> = old_version
            .as_ref()
            .and_then(|old| self.current_payload(&self.target_dir.join(old)))
            .map(|p| p.keys().map(|k| top_level(k)).collect())
            .unwrap_or_default();
        let new_names: BTreeSet<String> = payload.keys().map(|k| top_level(k)).collect();
        for name in &new_names {
            let link = self.target_dir.join(name);
            if std::fs::symlink_metadata(&link).is_err() {
                symlink(Path::new(DATA_DIR_NAME).join(name), &link)
                    .map_err(|e| Error::io("symlink", &link, e))?;
            }
        }
        for name in old_names.difference(&new_names) {
            let link = self.target_dir.join(name);
            std::fs::remove_file(&link).map_err(|e| Error::io("remove", &link, e))?;
        }
        if let Some(old) = old_version {
            let old = self.target_dir.join(old);
            std::fs::remove_dir_all(&old).map_err(|e| Error::io("remove", &old, e))?;
        }
        Ok(())
    }

    /// The files of the version directory `dir`, or `None` if it cannot be read.
    fn current_payload(&self, dir: &Path) -> Option<BTreeMap<String, FileProjection>> {
        let mut out = BTreeMap::new();
        let mut pending = vec![PathBuf::new()];
        while let Some(rel) = pending.pop() {
            for entry in std::fs::read_dir(dir.join(&rel)).ok()? {
                let entry = entry.ok()?;
                let path = rel.join(entry.file_name());
                let meta = entry.metadata().ok()?;
                if meta.is_dir() {
                    pending.push(path);
                } else {
                    out.insert(
                        path.to_string_lossy().into_owned(),
                        FileProjection {
                            data: std::fs::read(dir.join(&path)).ok()?,
                            mode: meta.permissions().mode() & 0o7777,
                        },
                    );
                }
            }
        }
        Some(out)
    }

    /// Creates `..<UTC timestamp>.<nanoseconds>` (mode 0755) and returns its name.
    fn new_version_dir(&self) -> Result<String> {
        let now = chrono::Utc::now();
        for attempt in 0u32..10 {
            let name = format!(
                "{}{}",
                now.format("..%Y_%m_%d_%H_%M_%S."),
                now.timestamp_subsec_nanos().wrapping_add(attempt)
            );
            let path = self.target_dir.join(&name);
            match std::fs::create_dir(&path) {
                Ok(()) => {
                    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                        .map_err(|e| Error::io("chmod", &path, e))?;
                    return Ok(name);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(Error::io("mkdir", &path, e)),
            }
        }
        Err(Error::Volume(format!(
            "no free version directory name in {}",
            self.target_dir.display()
        )))
    }

    fn write_payload(&self, dir: &Path, payload: &BTreeMap<String, FileProjection>) -> Result<()> {
        for (rel, file) in payload {
            let path = dir.join(rel);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|e| Error::io("mkdir", parent, e))?;
            }
            std::fs::write(&path, &file.data).map_err(|e| Error::io("write", &path, e))?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(file.mode))
                .map_err(|e| Error::io("chmod", &path, e))?;
        }
        Ok(())
    }

    /// Points `..data` at `version` with one rename of a fresh symlink.
    fn switch_data_link(&self, version: &str) -> Result<()> {
        let tmp = self.target_dir.join(NEW_DATA_DIR_NAME);
        let _ = std::fs::remove_file(&tmp);
        symlink(version, &tmp).map_err(|e| Error::io("symlink", &tmp, e))?;
        std::fs::rename(&tmp, self.target_dir.join(DATA_DIR_NAME))
            .map_err(|e| Error::io("rename", &tmp, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(files: &[(&str, &str, u32)]) -> BTreeMap<String, FileProjection> {
        files
            .iter()
            .map(|(p, d, m)| {
                (
                    (*p).to_owned(),
                    FileProjection {
                        data: d.as_bytes().to_vec(),
                        mode: *m,
                    },
                )
            })
            .collect()
    }

    fn versions(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("..") && n != DATA_DIR_NAME)
            .collect();
        names.sort();
        names
    }

    #[test]
    fn writes_with_the_data_link_layout_and_updates_atomically() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let writer = AtomicWriter::new(dir);
        writer
            .write(&payload(&[
                ("labels", "a=\"1\"", 0o644),
                ("sub/name", "pod", 0o400),
            ]))
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("labels")).unwrap(),
            "a=\"1\""
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("sub/name")).unwrap(),
            "pod"
        );
        assert_eq!(
            std::fs::read_link(dir.join("labels")).unwrap(),
            Path::new("..data/labels")
        );
        assert_eq!(
            std::fs::read_link(dir.join("sub")).unwrap(),
            Path::new("..data/sub")
        );
        let first = versions(dir);
        assert_eq!(first.len(), 1);
        assert!(first[0].starts_with("..20"), "{first:?}");
        assert_eq!(
            std::fs::read_link(dir.join(DATA_DIR_NAME)).unwrap(),
            Path::new(&first[0])
        );
        let mode = std::fs::metadata(dir.join("sub/name"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o400);

        // Same payload: nothing changes.
        writer
            .write(&payload(&[
                ("labels", "a=\"1\"", 0o644),
                ("sub/name", "pod", 0o400),
            ]))
            .unwrap();
        assert_eq!(versions(dir), first);

        // New content, one name dropped: a new version, the old one and the stale link gone.
        writer
            .write(&payload(&[("labels", "a=\"2\"", 0o644)]))
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("labels")).unwrap(),
            "a=\"2\""
        );
        assert!(std::fs::symlink_metadata(dir.join("sub")).is_err());
        let second = versions(dir);
        assert_eq!(second.len(), 1);
        assert_ne!(second, first);

        // A mode change alone is a change too.
        writer
            .write(&payload(&[("labels", "a=\"2\"", 0o600)]))
            .unwrap();
        let mode = std::fs::metadata(dir.join("labels"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn invalid_paths_are_refused_before_writing() {
        let tmp = tempfile::tempdir().unwrap();
        let writer = AtomicWriter::new(tmp.path());
        for bad in ["/abs", "a/../b", "..hidden", ""] {
            assert!(
                writer.write(&payload(&[(bad, "x", 0o644)])).is_err(),
                "{bad}"
            );
        }
        assert!(versions(tmp.path()).is_empty());
    }
}
