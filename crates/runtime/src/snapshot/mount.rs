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

    /// Mounts the overlay on `target` (an existing directory), `volatile` where the kernel
    /// has it (Linux 5.10+; the plain mount otherwise, found out once per process).
    ///
    /// `volatile` skips every sync of the writable layer, above all the sync of the whole
    /// upper filesystem at unmount, which made RemoveContainer wait for the disk. A
    /// container's writable layer never outlives a crash of the node in Kubernetes (a
    /// restarted container gets a new one), so it loses nothing that could be seen; the
    /// kernel refuses to mount a volatile layer again after a crash, and Skiff never
    /// remounts the layer of a container that existed before.
    ///
    /// The kernel copies mount data into a single page, so the option string (about
    /// 80 bytes per layer with the default root) must stay below the page size, 4096 bytes
    /// on x86-64: images of more than ~45 layers fail here with a clear error.
    pub fn mount(&self, target: &Path) -> anyhow::Result<()> {
        use std::sync::atomic::{AtomicU8, Ordering};
        /// Whether `volatile` is accepted: 0 not known yet, 1 yes, 2 no.
        static VOLATILE: AtomicU8 = AtomicU8::new(0);
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
        let overlay = |data: &str| {
            nix::mount::mount(
                Some("overlay"),
                target,
                Some("overlay"),
                MsFlags::empty(),
                Some(data),
            )
        };
        let volatile = format!("{options},volatile");
        if VOLATILE.load(Ordering::Relaxed) != 2 && volatile.len() < limit {
            match overlay(&volatile) {
                Ok(()) => {
                    VOLATILE.store(1, Ordering::Relaxed);
                    return Ok(());
                }
                Err(Errno::EINVAL) if VOLATILE.load(Ordering::Relaxed) == 0 => {
                    overlay(&options).with_context(|| {
                        format!("mount overlay on {} ({options})", target.display())
                    })?;
                    VOLATILE.store(2, Ordering::Relaxed);
                    return Ok(());
                }
                Err(err) => {
                    return Err(err).with_context(|| {
                        format!("mount overlay on {} ({volatile})", target.display())
                    });
                }
            }
        }
        overlay(&options)
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
