//! Crash-safe publication: build under a temporary name in the same directory, then rename.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Prefix of every temporary name; anything starting with it is garbage after a restart.
pub(crate) const TEMP_PREFIX: &str = ".tmp-";

/// A fresh temporary path next to `path` (same directory, so a rename publishes it).
pub(crate) fn temp_path(path: &Path) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!("{TEMP_PREFIX}{}-{n}-{name}", std::process::id()))
}

/// Writes `data` to `path` atomically: readers see the old file or the complete new one.
pub(crate) fn write_atomic(path: &Path, data: &[u8]) -> io::Result<()> {
    let temp = temp_path(path);
    let result = (|| {
        let mut file = fs::File::create(&temp)?;
        file.write_all(data)?;
        file.sync_all()?;
        fs::rename(&temp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    result
}

/// Removes leftovers of interrupted work (entries named [`TEMP_PREFIX`]`*`) in `dir`.
pub(crate) fn remove_temporaries(dir: &Path) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if !entry.file_name().to_string_lossy().starts_with(TEMP_PREFIX) {
            continue;
        }
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            fs::remove_dir_all(&path)?;
        } else {
            fs::remove_file(&path)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_is_all_or_nothing_and_leftovers_are_cleaned() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("record.json");
        write_atomic(&path, b"one").expect("write");
        write_atomic(&path, b"two").expect("rewrite");
        assert_eq!(fs::read(&path).expect("read"), b"two");
        // An interrupted write leaves only a temporary, never a partial `record.json`.
        let leftover = temp_path(&path);
        fs::write(&leftover, b"partial").expect("write");
        fs::create_dir(temp_path(&dir.path().join("layer"))).expect("mkdir");
        remove_temporaries(dir.path()).expect("clean");
        let names: Vec<_> = fs::read_dir(dir.path())
            .expect("list")
            .map(|entry| entry.expect("entry").file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("record.json")]);
    }
}
