//! Namespace pins: a pod's network, IPC and UTS namespaces kept alive without a pause
//! process, as nsfs bind mounts on files under `<state>/ns/<sandbox-id>/{net,ipc,uts}`
//! (the technique of `ip netns add`).

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use nix::mount::{MntFlags, MsFlags};
use nix::sched::CloneFlags;

/// A namespace kind a sandbox can pin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Network namespace (`CLONE_NEWNET`).
    Net,
    /// System V IPC / POSIX message queue namespace (`CLONE_NEWIPC`).
    Ipc,
    /// Hostname namespace (`CLONE_NEWUTS`).
    Uts,
}

impl Kind {
    /// The name under `/proc/<pid>/ns/`.
    pub fn proc_name(self) -> &'static str {
        match self {
            Kind::Net => "net",
            Kind::Ipc => "ipc",
            Kind::Uts => "uts",
        }
    }

    fn clone_flag(self) -> CloneFlags {
        match self {
            Kind::Net => CloneFlags::CLONE_NEWNET,
            Kind::Ipc => CloneFlags::CLONE_NEWIPC,
            Kind::Uts => CloneFlags::CLONE_NEWUTS,
        }
    }
}

/// The pin file of namespace `kind` in directory `dir`.
pub fn pin_path(dir: &Path, kind: Kind) -> PathBuf {
    dir.join(kind.proc_name())
}

/// Creates fresh namespaces of `kinds` and pins them under `dir` (created here).
///
/// The work happens on a short-lived dedicated thread: it `unshare`s the namespaces (which
/// only affects that thread), sets `hostname` when a UTS namespace is new, bind-mounts
/// `/proc/thread-self/ns/<kind>` onto each pin file and exits. `dir` should sit under a
/// directory prepared with [`prepare_root`]. On error nothing is left pinned.
pub fn pin(dir: &Path, kinds: &[Kind], hostname: &str) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let (dir_owned, kinds_owned, hostname) =
        (dir.to_path_buf(), kinds.to_vec(), hostname.to_string());
    let result = std::thread::Builder::new()
        .name("ns-pin".into())
        .spawn(move || pin_on_this_thread(&dir_owned, &kinds_owned, &hostname))
        .context("spawning the namespace thread")?
        .join()
        .unwrap_or_else(|_| Err(anyhow::anyhow!("namespace thread panicked")));
    if result.is_err() {
        let _ = unpin(dir);
    }
    result
}

fn pin_on_this_thread(dir: &Path, kinds: &[Kind], hostname: &str) -> anyhow::Result<()> {
    let flags = kinds
        .iter()
        .fold(CloneFlags::empty(), |acc, kind| acc | kind.clone_flag());
    nix::sched::unshare(flags).context("unshare")?;
    if kinds.contains(&Kind::Uts) && !hostname.is_empty() {
        nix::unistd::sethostname(hostname).with_context(|| format!("sethostname {hostname:?}"))?;
    }
    for &kind in kinds {
        let target = pin_path(dir, kind);
        std::fs::File::create(&target).with_context(|| format!("creating {}", target.display()))?;
        let source = format!("/proc/thread-self/ns/{}", kind.proc_name());
        nix::mount::mount(
            Some(source.as_str()),
            &target,
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        )
        .with_context(|| format!("bind-mounting {source} onto {}", target.display()))?;
    }
    Ok(())
}

/// Whether `path` is a live namespace pin (an nsfs mount).
pub fn is_pinned(path: &Path) -> bool {
    nix::sys::statfs::statfs(path)
        .is_ok_and(|fs| fs.filesystem_type() == nix::sys::statfs::NSFS_MAGIC)
}

/// Unmounts every pin in `dir` and removes the directory. Absent pins are fine.
pub fn unpin(dir: &Path) -> anyhow::Result<()> {
    for kind in [Kind::Net, Kind::Ipc, Kind::Uts] {
        let path = pin_path(dir, kind);
        while is_pinned(&path) {
            nix::mount::umount2(&path, MntFlags::MNT_DETACH)
                .with_context(|| format!("unmounting {}", path.display()))?;
        }
    }
    crate::store::remove_dir_if_exists(dir)
}

/// Makes sure pins under `dir` (created if needed), the parent of all pin directories, do
/// not propagate to other mount namespaces: when the mount holding `dir` has shared
/// propagation, `dir` becomes a private bind mount of itself (once). Called when the
/// runtime starts.
pub fn prepare_root(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let dir = dir.canonicalize()?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")?;
    let Some(holder) = containing_mount(&mountinfo, &dir) else {
        return Ok(());
    };
    if !holder.shared {
        return Ok(());
    }
    if Path::new(&holder.mount_point) != dir {
        nix::mount::mount(
            Some(&dir),
            &dir,
            None::<&str>,
            MsFlags::MS_BIND | MsFlags::MS_REC,
            None::<&str>,
        )
        .with_context(|| format!("bind-mounting {} onto itself", dir.display()))?;
    }
    nix::mount::mount(
        None::<&str>,
        &dir,
        None::<&str>,
        MsFlags::MS_PRIVATE | MsFlags::MS_REC,
        None::<&str>,
    )
    .with_context(|| format!("making {} private", dir.display()))
}

/// A mountinfo entry reduced to its mount point and propagation.
#[derive(Debug, PartialEq)]
pub(crate) struct MountEntry {
    /// Where it is mounted.
    pub mount_point: String,
    /// Propagation `shared:N`.
    pub shared: bool,
    /// Propagation `master:N` (a slave of a peer group).
    pub slave: bool,
}

/// The last-mounted entry of a `/proc/<pid>/mountinfo` text whose mount point is `path` or
/// an ancestor of it: the mount `path` lives on.
pub(crate) fn containing_mount(mountinfo: &str, path: &Path) -> Option<MountEntry> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let mount_point = unescape_octal(fields.get(4)?);
            let optional = || fields.iter().skip(6).take_while(|f| **f != "-");
            let shared = optional().any(|f| f.starts_with("shared:"));
            let slave = optional().any(|f| f.starts_with("master:"));
            path.starts_with(&mount_point).then_some((
                mount_point.len(),
                MountEntry {
                    mount_point,
                    shared,
                    slave,
                },
            ))
        })
        .fold(
            None,
            |best: Option<(usize, MountEntry)>, (len, entry)| match &best {
                Some((best_len, _)) if *best_len > len => best,
                _ => Some((len, entry)),
            },
        )
        .map(|(_, entry)| entry)
}

fn unescape_octal(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'\\')
            .then(|| field.get(i + 1..i + 4))
            .flatten()
            .and_then(|digits| u8::from_str_radix(digits, 8).ok());
        match escaped {
            Some(value) => {
                out.push(value);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_containing_mount() {
        let info = "27 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n\
                    40 27 0:5 / /run rw master:3 - tmpfs tmpfs rw\n\
                    41 27 0:6 / /mnt/with\\040space rw - ext3 /dev/root rw\n";
        let entry = |mount_point: &str, shared, slave| {
            Some(MountEntry {
                mount_point: mount_point.into(),
                shared,
                slave,
            })
        };
        assert_eq!(
            containing_mount(info, Path::new("/run/skiff/ns")),
            entry("/run", false, true)
        );
        assert_eq!(
            containing_mount(info, Path::new("/var/lib")),
            entry("/", true, false)
        );
        assert_eq!(
            containing_mount(info, Path::new("/mnt/with space/x")),
            entry("/mnt/with space", false, false)
        );
    }
}
