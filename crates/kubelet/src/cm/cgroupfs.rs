//! The cgroupfs driver (upstream `pkg/kubelet/cm/cgroup_manager_linux.go` with
//! libcontainer's fs / fs2 managers): creates, configures, lists and destroys cgroups by
//! their absolute cgroup path (`/kubepods/burstable/pod<uid>`), on cgroup v1 (one
//! hierarchy per mounted controller, plus the empty v2 hierarchy of hybrid hosts) or v2
//! (one unified hierarchy whose controllers are enabled through `cgroup.subtree_control`),
//! detected at run time from /proc/self/mountinfo.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;

use super::resources::ResourceConfig;
use crate::error::{Error, Result};

/// Controllers enabled for the kubelet's cgroups on cgroup v2 (when the parent has them).
const V2_CONTROLLERS: [&str; 6] = ["cpuset", "cpu", "io", "memory", "hugetlb", "pids"];
/// The cgroup v1 controllers (named in a hierarchy's mount options).
const V1_CONTROLLERS: [&str; 14] = [
    "cpu",
    "cpuacct",
    "cpuset",
    "memory",
    "devices",
    "freezer",
    "net_cls",
    "blkio",
    "perf_event",
    "net_prio",
    "hugetlb",
    "pids",
    "rdma",
    "misc",
];
/// Attempts to remove a cgroup whose tasks were just killed.
const REMOVE_ATTEMPTS: u32 = 5;
/// Pause between removal attempts.
const REMOVE_RETRY: Duration = Duration::from_millis(100);

/// One cgroup v1 hierarchy (or the controller-less v2 hierarchy of a hybrid host).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hierarchy {
    /// Where it is mounted, e.g. `/sys/fs/cgroup/memory`.
    pub mount: PathBuf,
    /// Its controllers (`cpu`, `cpuacct`, `memory`, ...; empty for the v2 one).
    pub controllers: Vec<String>,
}

/// The host's cgroup layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CgroupFs {
    /// cgroup v1 or hybrid: every mounted hierarchy.
    V1 {
        /// The hierarchies, in mountinfo order.
        hierarchies: Vec<Hierarchy>,
    },
    /// cgroup v2 (unified mode).
    V2 {
        /// Mount point of the unified hierarchy (`/sys/fs/cgroup`).
        root: PathBuf,
    },
}

impl CgroupFs {
    /// The layout of this host: v2 when only a cgroup2 filesystem is mounted, else v1.
    ///
    /// Errors when /proc/self/mountinfo cannot be read or shows no cgroup filesystem.
    pub fn detect() -> anyhow::Result<Self> {
        let info = std::fs::read_to_string("/proc/self/mountinfo")
            .context("reading /proc/self/mountinfo")?;
        Self::from_mountinfo(&info).context("no cgroup filesystem is mounted")
    }

    /// The layout described by a mountinfo text; `None` without cgroup mounts.
    pub fn from_mountinfo(info: &str) -> Option<Self> {
        let mut v1 = Vec::new();
        let mut v2 = Vec::new();
        for line in info.lines() {
            let Some((pre, post)) = line.split_once(" - ") else {
                continue;
            };
            let mut post = post.split_whitespace();
            let (Some(fstype), _, Some(options)) = (post.next(), post.next(), post.next()) else {
                continue;
            };
            let Some(mount) = pre.split_whitespace().nth(4).map(PathBuf::from) else {
                continue;
            };
            match fstype {
                "cgroup" => v1.push(Hierarchy {
                    mount,
                    controllers: options
                        .split(',')
                        .filter(|o| V1_CONTROLLERS.contains(o))
                        .map(str::to_owned)
                        .collect(),
                }),
                "cgroup2" => v2.push(mount),
                _ => {}
            }
        }
        match (v1.is_empty(), v2.first()) {
            (true, Some(root)) => Some(CgroupFs::V2 { root: root.clone() }),
            (true, None) => None,
            (false, _) => {
                v1.extend(v2.into_iter().map(|mount| Hierarchy {
                    mount,
                    controllers: Vec::new(),
                }));
                Some(CgroupFs::V1 { hierarchies: v1 })
            }
        }
    }

    /// Every directory that holds `cgroup` (one per hierarchy).
    fn dirs(&self, cgroup: &Path) -> Vec<PathBuf> {
        let relative = cgroup.strip_prefix("/").unwrap_or(cgroup);
        match self {
            CgroupFs::V1 { hierarchies } => {
                hierarchies.iter().map(|h| h.mount.join(relative)).collect()
            }
            CgroupFs::V2 { root } => vec![root.join(relative)],
        }
    }

    /// The directory of `cgroup` in the hierarchy holding `controller`.
    fn controller_dir(&self, controller: &str, cgroup: &Path) -> Option<PathBuf> {
        let relative = cgroup.strip_prefix("/").unwrap_or(cgroup);
        match self {
            CgroupFs::V1 { hierarchies } => hierarchies
                .iter()
                .find(|h| h.controllers.iter().any(|c| c == controller))
                .map(|h| h.mount.join(relative)),
            CgroupFs::V2 { root } => Some(root.join(relative)),
        }
    }

    /// True when `cgroup` exists in every hierarchy.
    pub fn exists(&self, cgroup: &Path) -> bool {
        self.dirs(cgroup).iter().all(|d| d.is_dir())
    }

    /// Creates `cgroup` and its missing parents in every hierarchy. On v1 a new cpuset
    /// cgroup inherits its parent's `cpuset.cpus` / `cpuset.mems`; on v2 the controllers
    /// are enabled in each parent's `cgroup.subtree_control` first.
    pub fn create(&self, cgroup: &Path) -> anyhow::Result<()> {
        let relative = cgroup.strip_prefix("/").unwrap_or(cgroup);
        match self {
            CgroupFs::V1 { hierarchies } => {
                for h in hierarchies {
                    let mut dir = h.mount.clone();
                    for part in relative.components() {
                        let parent = dir.clone();
                        dir.push(part);
                        make_dir(&dir)?;
                        if h.controllers.iter().any(|c| c == "cpuset") {
                            for file in ["cpuset.cpus", "cpuset.mems"] {
                                inherit(&parent, &dir, file)?;
                            }
                        }
                    }
                }
            }
            CgroupFs::V2 { root } => {
                let mut dir = root.clone();
                for part in relative.components() {
                    enable_controllers(&dir)?;
                    dir.push(part);
                    make_dir(&dir)?;
                }
            }
        }
        Ok(())
    }

    /// Writes the settings of `config` into `cgroup` (which must exist): v1 `cpu.shares`,
    /// `cpu.cfs_period_us`, `cpu.cfs_quota_us`, `memory.limit_in_bytes`, `pids.max`; v2
    /// `cpu.weight`, `cpu.max`, `memory.max`, `pids.max`.
    pub fn apply(&self, cgroup: &Path, config: &ResourceConfig) -> anyhow::Result<()> {
        let v2 = matches!(self, CgroupFs::V2 { .. });
        let cpu = self.controller_dir("cpu", cgroup);
        let memory = self.controller_dir("memory", cgroup);
        let pids = self.controller_dir("pids", cgroup);
        if let (Some(dir), Some(shares)) = (&cpu, config.cpu_shares) {
            if v2 {
                write(dir, "cpu.weight", &shares_to_weight(shares).to_string())?;
            } else {
                write(dir, "cpu.shares", &shares.to_string())?;
            }
        }
        if let (Some(dir), Some(quota)) = (&cpu, config.cpu_quota) {
            let period = config.cpu_period.unwrap_or(super::resources::QUOTA_PERIOD);
            if v2 {
                let quota = if quota <= 0 {
                    "max".to_owned()
                } else {
                    quota.to_string()
                };
                write(dir, "cpu.max", &format!("{quota} {period}"))?;
            } else {
                write(dir, "cpu.cfs_period_us", &period.to_string())?;
                let quota = if quota <= 0 { -1 } else { quota };
                write(dir, "cpu.cfs_quota_us", &quota.to_string())?;
            }
        }
        if let (Some(dir), Some(limit)) = (&memory, config.memory.filter(|m| *m > 0)) {
            let file = if v2 {
                "memory.max"
            } else {
                "memory.limit_in_bytes"
            };
            write(dir, file, &limit.to_string())?;
        }
        if let (Some(dir), Some(limit)) = (&pids, config.pids_limit) {
            let value = if limit <= 0 {
                "max".to_owned()
            } else {
                limit.to_string()
            };
            write(dir, "pids.max", &value)?;
        }
        Ok(())
    }

    /// Names of the child cgroups of `cgroup`, over all hierarchies, sorted.
    pub fn children(&self, cgroup: &Path) -> Vec<String> {
        let mut names: Vec<String> = self
            .dirs(cgroup)
            .iter()
            .filter_map(|d| std::fs::read_dir(d).ok())
            .flat_map(|entries| entries.flatten())
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// The memory working set of `cgroup` in bytes (usage minus inactive file pages, as
    /// cAdvisor computes it); `None` when unreadable.
    pub fn memory_working_set(&self, cgroup: &Path) -> Option<u64> {
        let dir = self.controller_dir("memory", cgroup)?;
        let (usage_file, inactive_key) = match self {
            CgroupFs::V1 { .. } => ("memory.usage_in_bytes", "total_inactive_file"),
            CgroupFs::V2 { .. } => ("memory.current", "inactive_file"),
        };
        let usage: u64 = std::fs::read_to_string(dir.join(usage_file))
            .ok()?
            .trim()
            .parse()
            .ok()?;
        let stat = std::fs::read_to_string(dir.join("memory.stat")).unwrap_or_default();
        let inactive = stat
            .lines()
            .find_map(|l| l.strip_prefix(inactive_key)?.trim().parse::<u64>().ok())
            .unwrap_or(0);
        Some(usage.saturating_sub(inactive))
    }

    /// Kills every task left in `cgroup` (and its children), then removes it bottom-up
    /// from every hierarchy. Absent is fine.
    ///
    /// Errors name the directories that could not be removed.
    pub fn destroy(&self, cgroup: &Path) -> anyhow::Result<()> {
        let dirs = self.dirs(cgroup);
        for dir in &dirs {
            kill_tasks(dir);
        }
        let mut failures = Vec::new();
        for dir in &dirs {
            let mut result = remove_tree(dir);
            for _ in 1..REMOVE_ATTEMPTS {
                if result.is_ok() {
                    break;
                }
                std::thread::sleep(REMOVE_RETRY);
                kill_tasks(dir);
                result = remove_tree(dir);
            }
            if let Err(e) = result {
                failures.push(e.to_string());
            }
        }
        anyhow::ensure!(
            failures.is_empty(),
            "removing cgroup {}: {}",
            cgroup.display(),
            failures.join("; ")
        );
        Ok(())
    }
}

/// cgroup v2 `cpu.weight` for v1 `cpu.shares` (libcontainer's
/// `ConvertCPUSharesToCgroupV2Value`): [2, 262144] maps linearly onto [1, 10000].
pub fn shares_to_weight(shares: u64) -> u64 {
    if shares == 0 {
        return 0;
    }
    1 + (shares.saturating_sub(2) * 9999) / 262_142
}

fn make_dir(dir: &Path) -> anyhow::Result<()> {
    match std::fs::create_dir(dir) {
        Err(e) if e.kind() != ErrorKind::AlreadyExists => {
            Err(e).with_context(|| format!("creating cgroup {}", dir.display()))
        }
        _ => Ok(()),
    }
}

fn write(dir: &Path, file: &str, value: &str) -> anyhow::Result<()> {
    let path = dir.join(file);
    std::fs::write(&path, value).with_context(|| format!("writing {value:?} to {}", path.display()))
}

/// Copies `file` from `parent` into `dir` when `dir`'s copy is missing or empty.
fn inherit(parent: &Path, dir: &Path, file: &str) -> anyhow::Result<()> {
    let current = std::fs::read_to_string(dir.join(file)).unwrap_or_default();
    if !current.trim().is_empty() {
        return Ok(());
    }
    match std::fs::read_to_string(parent.join(file)) {
        Ok(value) if !value.trim().is_empty() => write(dir, file, value.trim()),
        _ => Ok(()),
    }
}

/// Enables in `dir`'s `cgroup.subtree_control` the wanted controllers it offers and has
/// not enabled yet.
fn enable_controllers(dir: &Path) -> anyhow::Result<()> {
    let available = std::fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default();
    let enabled = std::fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap_or_default();
    let missing: Vec<String> = V2_CONTROLLERS
        .iter()
        .filter(|c| available.split_whitespace().any(|a| a == **c))
        .filter(|c| !enabled.split_whitespace().any(|e| e == **c))
        .map(|c| format!("+{c}"))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    write(dir, "cgroup.subtree_control", &missing.join(" "))
}

/// SIGKILLs the tasks of `dir` and its child cgroups.
fn kill_tasks(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                kill_tasks(&entry.path());
            }
        }
    }
    let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
    for pid in procs.lines().filter_map(|p| p.trim().parse::<i32>().ok()) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// Removes a cgroup directory and its child cgroups, deepest first (a cgroup directory
/// holds only control files, which `rmdir` takes along).
fn remove_tree(dir: &Path) -> Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::Cgroup(format!("{}: {e}", dir.display()))),
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            remove_tree(&entry.path())?;
        }
    }
    match std::fs::remove_dir(dir) {
        Err(e) if e.kind() != ErrorKind::NotFound => {
            Err(Error::Cgroup(format!("{}: {e}", dir.display())))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
30 24 0:26 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755
31 30 0:27 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw
32 30 0:28 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
33 30 0:29 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,xattr,name=systemd
40 24 0:40 / /proc rw - proc proc rw";

    #[test]
    fn detects_v1_hybrid_and_v2() {
        let CgroupFs::V1 { hierarchies } = CgroupFs::from_mountinfo(HYBRID).unwrap() else {
            panic!("hybrid is v1");
        };
        let controllers: Vec<_> = hierarchies.iter().map(|h| h.controllers.clone()).collect();
        assert_eq!(
            controllers,
            vec![vec!["cpu".to_owned(), "cpuacct".to_owned()], vec![], vec![]]
        );
        assert_eq!(hierarchies[2].mount, Path::new("/sys/fs/cgroup/unified"));
        let v2 = "25 20 0:22 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate";
        assert_eq!(
            CgroupFs::from_mountinfo(v2),
            Some(CgroupFs::V2 {
                root: "/sys/fs/cgroup".into()
            })
        );
        assert_eq!(
            CgroupFs::from_mountinfo("40 24 0:40 / /proc rw - proc proc rw"),
            None
        );
    }

    #[test]
    fn v2_enables_controllers_and_writes_limits() {
        let root = tempfile::tempdir().unwrap();
        let fs = CgroupFs::V2 {
            root: root.path().to_path_buf(),
        };
        std::fs::write(
            root.path().join("cgroup.controllers"),
            "cpuset cpu io memory pids misc",
        )
        .unwrap();
        let pod = Path::new("/kubepods/burstable/podu1");
        fs.create(pod).unwrap();
        assert!(fs.exists(pod));
        assert_eq!(
            std::fs::read_to_string(root.path().join("cgroup.subtree_control")).unwrap(),
            "+cpuset +cpu +io +memory +pids"
        );
        let config = ResourceConfig {
            cpu_shares: Some(1024),
            cpu_quota: Some(50_000),
            cpu_period: Some(100_000),
            memory: Some(64 << 20),
            pids_limit: Some(100),
        };
        fs.apply(pod, &config).unwrap();
        let dir = root.path().join("kubepods/burstable/podu1");
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
        assert_eq!(read("cpu.weight"), "39");
        assert_eq!(read("cpu.max"), "50000 100000");
        assert_eq!(read("memory.max"), (64u64 << 20).to_string());
        assert_eq!(read("pids.max"), "100");
        fs.apply(
            pod,
            &ResourceConfig {
                cpu_quota: Some(-1),
                pids_limit: Some(-1),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(read("cpu.max"), "max 100000");
        assert_eq!(read("pids.max"), "max");
        assert_eq!(fs.children(Path::new("/kubepods/burstable")), vec!["podu1"]);
        // Files of a real cgroupfs vanish with rmdir; remove the test's by hand.
        for f in ["cpu.weight", "cpu.max", "memory.max", "pids.max"] {
            std::fs::remove_file(dir.join(f)).unwrap();
        }
        fs.destroy(pod).unwrap();
        assert!(!dir.exists());
        fs.destroy(pod).unwrap();
    }

    #[test]
    fn v1_creates_in_every_hierarchy_and_inherits_cpusets() {
        let root = tempfile::tempdir().unwrap();
        let h = |name: &str, controllers: &[&str]| {
            let mount = root.path().join(name);
            std::fs::create_dir(&mount).unwrap();
            Hierarchy {
                mount,
                controllers: controllers.iter().map(|c| (*c).to_owned()).collect(),
            }
        };
        let fs = CgroupFs::V1 {
            hierarchies: vec![
                h("cpu", &["cpu"]),
                h("memory", &["memory"]),
                h("cpuset", &["cpuset"]),
                h("pids", &["pids"]),
            ],
        };
        std::fs::write(root.path().join("cpuset/cpuset.cpus"), "0-3\n").unwrap();
        std::fs::write(root.path().join("cpuset/cpuset.mems"), "0\n").unwrap();
        let pod = Path::new("/kubepods/podu2");
        fs.create(pod).unwrap();
        assert!(fs.exists(pod));
        for level in ["cpuset/kubepods", "cpuset/kubepods/podu2"] {
            let cpus = std::fs::read_to_string(root.path().join(level).join("cpuset.cpus"));
            assert_eq!(cpus.unwrap(), "0-3");
        }
        fs.apply(
            pod,
            &ResourceConfig {
                cpu_shares: Some(2),
                cpu_quota: Some(20_000),
                cpu_period: Some(100_000),
                memory: Some(1 << 30),
                pids_limit: None,
            },
        )
        .unwrap();
        let read = |f: &str| std::fs::read_to_string(root.path().join(f)).unwrap();
        assert_eq!(read("cpu/kubepods/podu2/cpu.shares"), "2");
        assert_eq!(read("cpu/kubepods/podu2/cpu.cfs_quota_us"), "20000");
        assert_eq!(read("cpu/kubepods/podu2/cpu.cfs_period_us"), "100000");
        assert_eq!(
            read("memory/kubepods/podu2/memory.limit_in_bytes"),
            "1073741824"
        );
        assert!(!root.path().join("pids/kubepods/podu2/pids.max").exists());
        std::fs::write(
            root.path()
                .join("memory/kubepods/podu2/memory.usage_in_bytes"),
            "1000\n",
        )
        .unwrap();
        std::fs::write(
            root.path().join("memory/kubepods/podu2/memory.stat"),
            "cache 10\ntotal_inactive_file 300\n",
        )
        .unwrap();
        assert_eq!(fs.memory_working_set(pod), Some(700));
    }

    #[test]
    fn weight_from_shares() {
        assert_eq!(shares_to_weight(2), 1);
        assert_eq!(shares_to_weight(1024), 39);
        assert_eq!(shares_to_weight(262_144), 10_000);
    }
}
