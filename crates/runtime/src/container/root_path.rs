//! Paths inside a container's root filesystem, resolved the way containerd's `fs.RootPath`
//! and `filepath-securejoin`'s `SecureJoin` do: every symlink met on the way is followed
//! *inside* the root (an absolute target starts again at the root, `..` stops at the
//! root), so the result never names anything outside it, whatever the image holds.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

/// Most symlinks followed in one resolution, as `filepath-securejoin` (Linux's own limit
/// for a path walk is 40).
const MAX_SYMLINKS: u32 = 255;

/// `root` joined with `unsafe_path` (absolute or relative to the root), with every symlink
/// of the walk resolved inside `root`. Components that do not exist are taken as they are,
/// so the result may name a missing file. The final component is resolved too: a symlink
/// there is followed.
///
/// Errors: `ELOOP` (as an `io::Error`) after [`MAX_SYMLINKS`] symlinks; other errors of
/// reading a link. Only `root` itself is trusted; it is not resolved.
pub fn secure_join(root: &Path, unsafe_path: &Path) -> std::io::Result<PathBuf> {
    // The components still to walk, last first, so a link's target is pushed in front.
    let mut pending: Vec<OsString> = components(unsafe_path);
    pending.reverse();
    // What has been resolved so far, relative to the root.
    let mut resolved: Vec<OsString> = Vec::new();
    let mut links = 0;
    while let Some(part) = pending.pop() {
        if part == ".." {
            resolved.pop();
            continue;
        }
        let candidate = join(root, &resolved).join(&part);
        match std::fs::symlink_metadata(&candidate) {
            Ok(meta) if meta.file_type().is_symlink() => {
                links += 1;
                if links > MAX_SYMLINKS {
                    return Err(std::io::Error::from_raw_os_error(libc::ELOOP));
                }
                let target = std::fs::read_link(&candidate)?;
                if target.is_absolute() {
                    resolved.clear();
                }
                let mut parts = components(&target);
                parts.reverse();
                pending.extend(parts);
            }
            _ => resolved.push(part),
        }
    }
    Ok(join(root, &resolved))
}

/// The normal components of `path` and its `..`s, in order (`.`, `/` and empty ones
/// dropped).
fn components(path: &Path) -> Vec<OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect()
}

fn join(root: &Path, parts: &[OsString]) -> PathBuf {
    let mut path = root.to_path_buf();
    for part in parts {
        debug_assert!(!part.as_bytes().contains(&b'/'));
        path.push(part);
    }
    path
}

/// Reads the regular file at `path` inside `root` (resolved with [`secure_join`]); a
/// missing file, a loop or anything but a regular file reads as `None`.
pub fn read_in_root(root: &Path, path: &str) -> Option<String> {
    let resolved = secure_join(root, Path::new(path)).ok()?;
    // The walk left no symlink in `resolved`; O_NOFOLLOW keeps it so if the tree changes.
    // O_NONBLOCK: a FIFO in the image must not block the caller.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(resolved)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    std::io::read_to_string(file).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn symlinks_resolve_inside_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("lib/real")).unwrap();
        std::fs::write(root.join("lib/real/passwd"), "app:x:1234:1234::/:/bin/sh\n").unwrap();
        // An absolute link, a relative one through `..`, and a link escaping the root.
        symlink("/lib/real", root.join("etc")).unwrap();
        symlink("../../lib/real/passwd", root.join("lib/real/rel")).unwrap();
        symlink("../../../../../../etc/hostname", root.join("escape")).unwrap();
        symlink("/loop", root.join("loop")).unwrap();

        assert_eq!(
            secure_join(root, Path::new("/etc/passwd")).unwrap(),
            root.join("lib/real/passwd")
        );
        assert_eq!(
            secure_join(root, Path::new("etc/rel")).unwrap(),
            root.join("lib/real/passwd")
        );
        // `..` stops at the root, and `/etc` there is the image's link to `/lib/real`.
        assert_eq!(
            secure_join(root, Path::new("/escape")).unwrap(),
            root.join("lib/real/hostname")
        );
        assert_eq!(
            secure_join(root, Path::new("/../../x/./y")).unwrap(),
            root.join("x/y")
        );
        let err = secure_join(root, Path::new("/loop/a")).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ELOOP));

        assert_eq!(
            read_in_root(root, "/etc/passwd").as_deref(),
            Some("app:x:1234:1234::/:/bin/sh\n")
        );
        assert_eq!(read_in_root(root, "/escape"), None);
        assert_eq!(
            read_in_root(root, "/etc"),
            None,
            "a directory is not a file"
        );
    }
}
