//! Mount table queries and the tmpfs mount/unmount calls of the volume plugins (upstream
//! `k8s.io/mount-utils`).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use nix::mount::{MntFlags, MsFlags};

/// Mount points listed in `/proc/self/mountinfo`, in mount order. Empty if unreadable.
pub fn mount_points() -> Vec<PathBuf> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .map(|info| parse_mount_points(&info))
        .unwrap_or_default()
}

/// The mount point (5th field, octal escapes decoded) of each mountinfo line.
fn parse_mount_points(mountinfo: &str) -> Vec<PathBuf> {
    mountinfo
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|field| PathBuf::from(unescape_octal(field)))
        .collect()
}

/// Decodes the `\NNN` escapes the kernel writes for space, tab, newline and backslash.
fn unescape_octal(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let code = bytes
            .get(i + 1..i + 4)
            .filter(|_| bytes[i] == b'\\')
            .and_then(|d| std::str::from_utf8(d).ok())
            .and_then(|d| u8::from_str_radix(d, 8).ok());
        match code {
            Some(c) => {
                out.push(c);
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The canonical form of `path` for comparing with the mount table (the path itself
/// when it cannot be resolved, e.g. because it no longer exists).
fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// True when the mount holding `path` (the longest mount point that is a prefix of its
/// canonical form) has shared propagation (a `shared:N` optional field).
fn is_shared(mountinfo: &str, path: &Path) -> bool {
    let path = canonical(path);
    mountinfo
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let mount_point = PathBuf::from(unescape_octal(fields.get(4)?));
            let optional = fields.iter().skip(6).take_while(|f| **f != "-");
            let shared = optional.clone().any(|f| f.starts_with("shared:"));
            path.starts_with(&mount_point)
                .then_some((mount_point, shared))
        })
        .max_by_key(|(mount_point, _)| mount_point.as_os_str().len())
        .is_some_and(|(_, shared)| shared)
}

/// Makes `dir` a shared mount with its submounts (upstream `MakeRShared`, done on the
/// kubelet root directory so that HostToContainer and Bidirectional volume mounts can
/// propagate): nothing when the mount holding it is shared already, otherwise a bind
/// mount of `dir` on itself, made rshared. The bind mount stays, as upstream's does.
pub fn make_rshared(dir: &Path) -> Result<()> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| Error::Volume(format!("reading /proc/self/mountinfo: {e}")))?;
    if is_shared(&mountinfo, dir) {
        return Ok(());
    }
    nix::mount::mount(Some(dir), dir, None::<&str>, MsFlags::MS_BIND, None::<&str>)
        .map_err(|e| Error::Volume(format!("failed to bind-mount {}: {e}", dir.display())))?;
    nix::mount::mount(
        None::<&str>,
        dir,
        None::<&str>,
        MsFlags::MS_SHARED | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(|e| Error::Volume(format!("failed to make {} rshared: {e}", dir.display())))
}

/// True when `path` is itself a mount point.
pub fn is_mount_point(path: &Path) -> bool {
    let path = canonical(path);
    mount_points().contains(&path)
}

/// Mount points at or below `path`, deepest (most recently mounted) first.
pub fn mounts_under(path: &Path) -> Vec<PathBuf> {
    let path = canonical(path);
    let mut found: Vec<PathBuf> = mount_points()
        .into_iter()
        .filter(|m| m.starts_with(&path))
        .collect();
    found.reverse();
    found
}

/// Mounts a tmpfs on `dir`, limited to `size_bytes` when positive (the kernel default of
/// half the RAM otherwise), as upstream's emptyDir `setupTmpfs`.
pub fn mount_tmpfs(dir: &Path, size_bytes: i64) -> Result<()> {
    let options = (size_bytes > 0).then(|| format!("size={size_bytes}"));
    nix::mount::mount(
        Some("tmpfs"),
        dir,
        Some("tmpfs"),
        MsFlags::empty(),
        options.as_deref(),
    )
    .map_err(|e| Error::Volume(format!("mount -t tmpfs {}: {e}", dir.display())))
}

/// Unmounts `dir`; a busy mount is detached lazily so that nothing stays mounted.
pub fn unmount(dir: &Path) -> Result<()> {
    match nix::mount::umount2(dir, MntFlags::empty()) {
        Ok(()) => Ok(()),
        Err(nix::errno::Errno::EBUSY) => nix::mount::umount2(dir, MntFlags::MNT_DETACH)
            .map_err(|e| Error::Volume(format!("unmount {}: {e}", dir.display()))),
        Err(e) => Err(Error::Volume(format!("unmount {}: {e}", dir.display()))),
    }
}

/// Unmounts everything at or below `dir` (deepest first), then removes `dir` and its
/// contents without following symlinks. A missing `dir` is not an error.
pub fn unmount_and_remove(dir: &Path) -> Result<()> {
    for mount in mounts_under(dir) {
        unmount(&mount)?;
    }
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io("removing", dir, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_mount_points_are_unescaped() {
        let info = "22 27 0:21 / /proc rw,relatime - proc proc rw\n\
                    90 27 0:50 / /var/lib/kubelet/pods/u/volumes/kubernetes.io~empty-dir/my\\040vol rw shared:5 - tmpfs tmpfs rw,size=1024k\n";
        assert_eq!(
            parse_mount_points(info),
            vec![
                PathBuf::from("/proc"),
                PathBuf::from("/var/lib/kubelet/pods/u/volumes/kubernetes.io~empty-dir/my vol")
            ]
        );
        assert_eq!(unescape_octal("a\\134b\\"), "a\\b\\");
    }

    #[test]
    fn shared_propagation_comes_from_the_holding_mount() {
        let info = "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n\
                    40 27 0:50 / /var/lib/kubelet rw shared:7 master:1 - ext4 /dev/vda rw\n\
                    41 40 0:51 / /var/lib/kubelet/private rw - tmpfs tmpfs rw\n";
        assert!(is_shared(info, Path::new("/var/lib/kubelet/pods/u")));
        assert!(!is_shared(info, Path::new("/var/lib/kubelet/private/x")));
        assert!(!is_shared(info, Path::new("/var/lib/kubelet2")));
        assert!(!is_shared(info, Path::new("/srv")));
    }
}
