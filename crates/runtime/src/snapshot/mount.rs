//! The overlay mount of an active snapshot.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use nix::errno::Errno;
use nix::mount::{MntFlags, MsFlags};

/// Where an active snapshot's layers live; [`Mount::mount`] stacks them with overlayfs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Read-only layer directories, top layer first (overlayfs `lowerdir` order).
    pub lowerdirs: Vec<PathBuf>,
    /// The writable layer (overlayfs `upperdir`).
    pub upperdir: PathBuf,
    /// overlayfs scratch directory, on the same filesystem as `upperdir`.
    pub workdir: PathBuf,
}

impl Mount {
    /// The overlayfs mount data: `lowerdir=<top>:...:<bottom>,upperdir=...,workdir=...`.
    pub fn options(&self) -> String {
        let lower: Vec<String> = self
            .lowerdirs
            .iter()
            .map(|dir| dir.display().to_string())
            .collect();
        format!(
            "lowerdir={},upperdir={},workdir={}",
            lower.join(":"),
            self.upperdir.display(),
            self.workdir.display()
        )
    }

    /// Mounts the overlay on `target` (an existing directory).
    ///
    /// The kernel copies mount data into a single page, so the option string (about
    /// 80 bytes per layer with the default root) must stay below the page size, 4096 bytes
    /// on x86-64: images of more than ~45 layers fail here with a clear error.
    pub fn mount(&self, target: &Path) -> anyhow::Result<()> {
        let options = self.options();
        let limit = page_size();
        if options.len() >= limit {
            bail!(
                "overlay mount options for {} are {} bytes, more than the page size {limit} \
                 the kernel accepts ({} layers)",
                target.display(),
                options.len(),
                self.lowerdirs.len()
            );
        }
        nix::mount::mount(
            Some("overlay"),
            target,
            Some("overlay"),
            MsFlags::empty(),
            Some(options.as_str()),
        )
        .with_context(|| format!("mount overlay on {} ({options})", target.display()))
    }
}

fn page_size() -> usize {
    nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .and_then(|size| usize::try_from(size).ok())
        .unwrap_or(4096)
}

/// Unmounts everything mounted on `target`. A missing or unmounted `target` is fine.
///
/// A busy mount is detached (`MNT_DETACH`) so that it goes away once its last user exits.
pub fn unmount(target: &Path) -> anyhow::Result<()> {
    // Mounts may be stacked on the same target; take them off one by one.
    for _ in 0..16 {
        match nix::mount::umount2(target, MntFlags::empty()) {
            Ok(()) => continue,
            Err(Errno::EINVAL | Errno::ENOENT) => return Ok(()),
            Err(Errno::EBUSY) => nix::mount::umount2(target, MntFlags::MNT_DETACH)
                .with_context(|| format!("detach busy mount {}", target.display()))?,
            Err(err) => {
                return Err(err).with_context(|| format!("unmount {}", target.display()));
            }
        }
    }
    bail!("{} still mounted after 16 unmounts", target.display())
}
