//! The pod's `/dev/shm`: one tmpfs per sandbox (64 MiB, as containerd's sandbox shm),
//! bind-mounted into each of its containers so they share POSIX shared memory. Pods that
//! use the node's IPC namespace use the node's `/dev/shm` instead and get none.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use nix::mount::{MntFlags, MsFlags};

/// Size of the tmpfs (containerd's `defaultShmSize`).
pub const SIZE: &str = "65536k";

/// `<files>/shm`: the mount point in a sandbox's files directory.
pub fn path(files: &Path) -> PathBuf {
    files.join("shm")
}

/// Mounts the sandbox's shm tmpfs at [`path`]`(files)` (`files` must exist).
pub fn mount(files: &Path) -> anyhow::Result<()> {
    let target = path(files);
    std::fs::create_dir_all(&target).with_context(|| format!("creating {}", target.display()))?;
    nix::mount::mount(
        Some("shm"),
        &target,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        Some(format!("mode=1777,size={SIZE}").as_str()),
    )
    .with_context(|| format!("mounting the pod's shm at {}", target.display()))
}

/// Unmounts the sandbox's shm (absent or already unmounted is fine).
pub fn unmount(files: &Path) -> anyhow::Result<()> {
    let target = path(files);
    while is_mounted(&target) {
        nix::mount::umount2(&target, MntFlags::MNT_DETACH)
            .with_context(|| format!("unmounting {}", target.display()))?;
    }
    Ok(())
}

/// Whether `path` is a mount point (another device than its parent directory).
fn is_mounted(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    match (
        std::fs::metadata(path),
        path.parent().map(std::fs::metadata),
    ) {
        (Ok(meta), Some(Ok(parent))) => meta.dev() != parent.dev(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn mounts_and_unmounts() {
        if !nix::unistd::Uid::effective().is_root() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        super::mount(dir.path()).unwrap();
        assert!(super::is_mounted(&super::path(dir.path())));
        super::unmount(dir.path()).unwrap();
        assert!(!super::is_mounted(&super::path(dir.path())));
        super::unmount(dir.path()).unwrap();
    }
}
