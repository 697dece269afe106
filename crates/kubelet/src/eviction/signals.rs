//! Observing the eviction signals (upstream `makeSignalObservations`, which reads the
//! summary API): memory from the root and `kubepods` cgroups, nodefs from `statvfs` of the
//! kubelet root directory, imagefs from CRI ImageFsInfo and `statvfs` of its mountpoint.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use k8s_cri::v1::ImageFsInfoRequest;

use super::threshold::Signal;
use crate::cm::ContainerManager;
use crate::cri::Cri;

/// One observed signal: what is left and what there is in total (bytes or inodes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observation {
    /// Available amount.
    pub available: i64,
    /// Capacity.
    pub capacity: i64,
}

/// Observations by signal; a signal that could not be observed is absent.
pub type Observations = BTreeMap<Signal, Observation>;

/// Free space of one filesystem.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsUsage {
    /// Bytes available to unprivileged users, and the size.
    pub available_bytes: i64,
    /// See `available_bytes`.
    pub capacity_bytes: i64,
    /// Free inodes, and the inode count.
    pub inodes_free: i64,
    /// See `inodes_free`.
    pub inodes: i64,
    /// Device number (to tell whether two paths share a filesystem).
    pub device: u64,
}

/// `statvfs` of the filesystem holding `path`; `None` when unreadable.
pub fn fs_usage(path: &Path) -> Option<FsUsage> {
    let fs = nix::sys::statvfs::statvfs(path).ok()?;
    let device = std::fs::metadata(path).ok()?.dev();
    let bytes = |blocks: u64| {
        i64::try_from(u128::from(blocks) * u128::from(fs.fragment_size())).unwrap_or(i64::MAX)
    };
    Some(FsUsage {
        available_bytes: bytes(fs.blocks_available()),
        capacity_bytes: bytes(fs.blocks()),
        inodes_free: i64::try_from(fs.files_free()).unwrap_or(i64::MAX),
        inodes: i64::try_from(fs.files()).unwrap_or(i64::MAX),
        device,
    })
}

/// The working set of the whole machine: the root memory cgroup's, or on cgroup v2
/// (whose root has no memory files) MemTotal − MemFree − Inactive(file) from
/// /proc/meminfo, as cAdvisor computes it.
fn node_memory_working_set(cm: &ContainerManager) -> Option<u64> {
    cm.memory_working_set(Path::new("/")).or_else(|| {
        let info = std::fs::read_to_string("/proc/meminfo").ok()?;
        let field = |name: &str| -> Option<u64> {
            let line = info.lines().find(|l| l.starts_with(name))?;
            Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? * 1024)
        };
        let usage = field("MemTotal:")?.saturating_sub(field("MemFree:")?);
        Some(usage.saturating_sub(field("Inactive(file):").unwrap_or(0)))
    })
}

/// Where the signals are read.
pub struct SignalSources<'a> {
    /// The container manager (memory capacity, allocatable, cgroups).
    pub container_manager: &'a ContainerManager,
    /// The runtime (ImageFsInfo).
    pub cri: &'a dyn Cri,
    /// The kubelet root directory (nodefs).
    pub root_dir: &'a Path,
}

/// What [`observe`] found besides the signals: whether the image filesystem is a
/// different filesystem from nodefs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FsLayout {
    /// The image filesystem's mountpoint, if the runtime reported one.
    pub image_fs: Option<PathBuf>,
    /// True when it is on another device than the kubelet root directory.
    pub dedicated_image_fs: bool,
}

/// Observes every signal it can.
pub async fn observe(src: &SignalSources<'_>) -> (Observations, FsLayout) {
    let mut out = Observations::new();
    let cm = src.container_manager;
    if let (Some(capacity), Some(used)) = (
        cm.capacity().get("memory").copied(),
        node_memory_working_set(cm),
    ) {
        out.insert(
            Signal::MemoryAvailable,
            Observation {
                available: capacity - i64::try_from(used).unwrap_or(i64::MAX),
                capacity,
            },
        );
    }
    if let (Some(capacity), Some(used)) = (
        cm.pods_allocatable().get("memory").copied(),
        cm.pods_memory_working_set(),
    ) {
        out.insert(
            Signal::AllocatableMemoryAvailable,
            Observation {
                available: capacity - i64::try_from(used).unwrap_or(i64::MAX),
                capacity,
            },
        );
    }
    let nodefs = fs_usage(src.root_dir);
    if let Some(fs) = nodefs {
        insert_fs(
            &mut out,
            fs,
            Signal::NodeFsAvailable,
            Signal::NodeFsInodesFree,
        );
    }
    let mut layout = FsLayout::default();
    if let Ok(info) = src.cri.image_fs_info(ImageFsInfoRequest {}).await
        && let Some(mountpoint) = info
            .image_filesystems
            .first()
            .and_then(|f| f.fs_id.as_ref())
            .map(|id| PathBuf::from(&id.mountpoint))
            .filter(|m| !m.as_os_str().is_empty())
    {
        if let Some(fs) = fs_usage(&mountpoint) {
            insert_fs(
                &mut out,
                fs,
                Signal::ImageFsAvailable,
                Signal::ImageFsInodesFree,
            );
            layout.dedicated_image_fs = nodefs.is_some_and(|n| n.device != fs.device);
        }
        layout.image_fs = Some(mountpoint);
    }
    (out, layout)
}

fn insert_fs(out: &mut Observations, fs: FsUsage, bytes: Signal, inodes: Signal) {
    out.insert(
        bytes,
        Observation {
            available: fs.available_bytes,
            capacity: fs.capacity_bytes,
        },
    );
    if fs.inodes > 0 {
        out.insert(
            inodes,
            Observation {
                available: fs.inodes_free,
                capacity: fs.inodes,
            },
        );
    }
}
