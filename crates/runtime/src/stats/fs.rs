//! Disk usage of a directory tree (a container's writable layer, the image filesystem),
//! counted like containerd's overlay snapshotter: allocated blocks and distinct inodes,
//! hard links counted once, symbolic links not followed.

use std::collections::HashSet;
use std::io;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

/// Bytes and inodes used under a directory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Allocated bytes (`st_blocks` × 512).
    pub used_bytes: u64,
    /// Distinct inodes, the directory itself included.
    pub inodes_used: u64,
}

/// The usage of the tree at `dir`. Entries removed while walking (a container deleting
/// files, a snapshot going away) are skipped, so a missing `dir` gives zero usage; other
/// I/O errors are returned.
pub fn usage(dir: &Path) -> io::Result<Usage> {
    let mut seen = HashSet::new();
    let mut used_bytes = 0;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(path) = pending.pop() {
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(err) if err.kind() == io::ErrorKind::NotFound => continue,
            Err(err) => return Err(err),
        };
        if !seen.insert((meta.dev(), meta.ino())) {
            continue;
        }
        used_bytes += meta.blocks() * 512;
        if meta.is_dir() {
            match std::fs::read_dir(&path) {
                Ok(entries) => {
                    for entry in entries {
                        pending.push(entry?.path());
                    }
                }
                Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                Err(err) => return Err(err),
            }
        }
    }
    Ok(Usage {
        used_bytes,
        inodes_used: seen.len() as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_blocks_and_inodes_once_per_hard_link() {
        let dir = tempfile::tempdir().unwrap();
        let empty = usage(dir.path()).unwrap();
        assert_eq!(empty.inodes_used, 1);
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/data"), vec![7u8; 64 * 1024]).unwrap();
        std::fs::hard_link(dir.path().join("sub/data"), dir.path().join("link")).unwrap();
        std::os::unix::fs::symlink("/etc", dir.path().join("etc")).unwrap();
        let full = usage(dir.path()).unwrap();
        assert_eq!(
            full.inodes_used, 4,
            "dir, sub, data (linked twice), symlink"
        );
        assert!(
            full.used_bytes >= empty.used_bytes + 64 * 1024,
            "{full:?} vs {empty:?}"
        );
        assert_eq!(
            usage(&dir.path().join("missing")).unwrap(),
            Usage::default()
        );
    }
}
