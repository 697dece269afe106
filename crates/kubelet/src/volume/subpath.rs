//! subPath safety (upstream `pkg/volume/util/subpath` and
//! `pkg/volume/validation.ValidatePathNoBacksteps`): a subPath is created inside its
//! volume when missing and must resolve, symlinks included, to a path inside the volume.

use crate::error::{Error, Result};
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

/// Errors with `must not contain '..'` when any component of `path` is `..`.
pub fn validate_path_no_backsteps(path: &Path) -> Result<()> {
    if path.components().any(|c| c == Component::ParentDir) {
        return Err(Error::Volume("must not contain '..'".to_owned()));
    }
    Ok(())
}

/// `base` resolved, and the error when `path` (resolved) is not inside it.
fn ensure_within(path: &Path, base: &Path) -> Result<PathBuf> {
    let base = std::fs::canonicalize(base)
        .map_err(|e| Error::Volume(format!("{}: {e}", base.display())))?;
    let resolved = std::fs::canonicalize(path)
        .map_err(|e| Error::Volume(format!("{}: {e}", path.display())))?;
    if !resolved.starts_with(&base) {
        return Err(Error::Volume(format!(
            "path {} is outside of allowed base {}",
            resolved.display(),
            base.display()
        )));
    }
    Ok(resolved)
}

/// Creates the missing directories of `sub_path` inside `base` with mode `perm`
/// (upstream `SafeMakeDir`). The part that exists must resolve inside `base`; each new
/// directory is created where the existing part resolved to, so a symlink cannot lead
/// the creation outside the volume. `sub_path` is relative and has no `..`.
pub fn safe_make_dir(sub_path: &Path, base: &Path, perm: u32) -> Result<()> {
    let mut existing = base.to_path_buf();
    let mut components = sub_path.components().peekable();
    while let Some(c) = components.peek() {
        let next = existing.join(c);
        if std::fs::symlink_metadata(&next).is_err() {
            break;
        }
        existing = next;
        components.next();
    }
    let mut current = ensure_within(&existing, base)?;
    for component in components {
        current.push(component);
        std::fs::create_dir(&current).map_err(|e| Error::io("mkdir", &current, e))?;
        // Set the mode explicitly: the process umask applies to mkdir.
        std::fs::set_permissions(&current, std::fs::Permissions::from_mode(perm))
            .map_err(|e| Error::io("chmod", &current, e))?;
    }
    Ok(())
}

/// The host path to mount for `sub_path` of the volume at `volume_path`: the subPath
/// resolved, which must lie inside the volume (upstream `PrepareSafeSubpath`; the
/// resolved path is returned so a symlink swapped in later cannot redirect the mount).
pub fn prepare_safe_subpath(volume_path: &Path, sub_path: &Path) -> Result<PathBuf> {
    ensure_within(&volume_path.join(sub_path), volume_path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn backsteps_are_refused() {
        assert!(validate_path_no_backsteps(Path::new("a/b")).is_ok());
        assert!(validate_path_no_backsteps(Path::new("a..b/c")).is_ok());
        assert_eq!(
            validate_path_no_backsteps(Path::new("a/../b"))
                .unwrap_err()
                .to_string(),
            "must not contain '..'"
        );
    }

    #[test]
    fn subpaths_are_created_inside_the_volume_with_its_mode() {
        let tmp = tempfile::tempdir().unwrap();
        let volume = tmp.path().join("vol");
        std::fs::create_dir(&volume).unwrap();
        safe_make_dir(Path::new("a/b"), &volume, 0o777).unwrap();
        let mode = std::fs::metadata(volume.join("a/b"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o777);
        // Existing part through a symlink that stays inside.
        symlink("a", volume.join("inside")).unwrap();
        safe_make_dir(Path::new("inside/c"), &volume, 0o755).unwrap();
        assert!(volume.join("a/c").is_dir());
        let resolved = prepare_safe_subpath(&volume, Path::new("inside/c")).unwrap();
        assert_eq!(resolved, std::fs::canonicalize(volume.join("a/c")).unwrap());
    }

    #[test]
    fn symlink_escapes_are_rejected() {
        let tmp = tempfile::tempdir().unwrap();
        let volume = tmp.path().join("vol");
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&volume).unwrap();
        std::fs::create_dir(&outside).unwrap();
        symlink(&outside, volume.join("escape")).unwrap();
        symlink("../outside", volume.join("relative-escape")).unwrap();
        for sub in ["escape", "relative-escape"] {
            let err = safe_make_dir(&Path::new(sub).join("new"), &volume, 0o755)
                .unwrap_err()
                .to_string();
            assert!(err.contains("outside of allowed base"), "{err}");
            let err = prepare_safe_subpath(&volume, Path::new(sub))
                .unwrap_err()
                .to_string();
            assert!(err.contains("outside of allowed base"), "{err}");
        }
        assert!(!outside.join("new").exists());
    }
}
