//! Node figures from the host: `/proc` and the root cgroup (v1 or v2, detected at run
//! time), filesystems by `statvfs` (the role cAdvisor plays for the upstream kubelet).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::summary::{FsStats, InterfaceStats};

/// Where the host's files are (the real ones by default; temporary trees in tests).
#[derive(Debug, Clone)]
pub struct HostPaths {
    /// procfs, `/proc`.
    pub proc: PathBuf,
    /// The cgroup mount, `/sys/fs/cgroup`.
    pub cgroup: PathBuf,
}

impl Default for HostPaths {
    fn default() -> Self {
        Self {
            proc: PathBuf::from("/proc"),
            cgroup: PathBuf::from("/sys/fs/cgroup"),
        }
    }
}

/// Node memory figures in bytes (see [`super::summary::MemoryStats`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeMemory {
    /// MemTotal.
    pub capacity: u64,
    /// All memory in use, caches included.
    pub usage: u64,
    /// Usage minus inactive file pages.
    pub working_set: u64,
    /// Anonymous memory.
    pub rss: u64,
    /// Cumulative page faults.
    pub page_faults: u64,
    /// Cumulative major page faults.
    pub major_page_faults: u64,
}

impl HostPaths {
    /// True on the unified hierarchy (cgroup v2): `cgroup.controllers` at the root.
    pub fn cgroup_v2(&self) -> bool {
        self.cgroup.join("cgroup.controllers").exists()
    }

    /// Cumulative CPU time of the whole node in nanoseconds: the root cgroup's
    /// `cpuacct.usage` (v1) or `cpu.stat usage_usec` (v2), else the busy time of `/proc/stat`.
    pub fn cpu_usage_core_nanoseconds(&self) -> Option<u64> {
        let cgroup = if self.cgroup_v2() {
            read_keyed(&self.cgroup.join("cpu.stat"))
                .get("usage_usec")
                .map(|us| us.saturating_mul(1000))
        } else {
            ["cpu,cpuacct", "cpuacct"]
                .iter()
                .find_map(|dir| read_u64(&self.cgroup.join(dir).join("cpuacct.usage")))
        };
        cgroup.or_else(|| self.proc_stat_busy_nanoseconds())
    }

    /// Busy time (all but idle and iowait) from the `cpu` line of `/proc/stat`, in
    /// nanoseconds (USER_HZ is 100 on Linux).
    fn proc_stat_busy_nanoseconds(&self) -> Option<u64> {
        let stat = std::fs::read_to_string(self.proc.join("stat")).ok()?;
        let line = stat.lines().find(|l| l.starts_with("cpu "))?;
        let ticks: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .filter_map(|v| v.parse().ok())
            .collect();
        let busy: u64 = ticks
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != 3 && *i != 4)
            .take(8)
            .map(|(_, t)| *t)
            .sum();
        Some(busy.saturating_mul(10_000_000))
    }

    /// Node memory: the root memory cgroup on v1; `/proc/meminfo` with the root
    /// `memory.stat` on v2 (the root has no `memory.current`), as cAdvisor does.
    pub fn memory(&self) -> Option<NodeMemory> {
        let meminfo = read_meminfo(&self.proc.join("meminfo"));
        let capacity = *meminfo.get("MemTotal")?;
        if self.cgroup_v2() {
            let stat = read_keyed(&self.cgroup.join("memory.stat"));
            let usage = capacity.saturating_sub(meminfo.get("MemFree").copied().unwrap_or(0));
            let inactive = stat
                .get("inactive_file")
                .or(meminfo.get("Inactive(file)"))
                .copied()
                .unwrap_or(0);
            return Some(NodeMemory {
                capacity,
                usage,
                working_set: usage.saturating_sub(inactive),
                rss: stat.get("anon").copied().unwrap_or(0),
                page_faults: stat.get("pgfault").copied().unwrap_or(0),
                major_page_faults: stat.get("pgmajfault").copied().unwrap_or(0),
            });
        }
        let mut memory = self.cgroup_memory(Path::new("/"))?;
        memory.capacity = capacity;
        Some(memory)
    }

    /// The directory of cgroup `path` (e.g. `/kubepods`) in `controller`'s hierarchy
    /// (v1) or in the unified one (v2).
    fn cgroup_dir(&self, controller: &str, path: &Path) -> PathBuf {
        let rel = path.strip_prefix("/").unwrap_or(path);
        if self.cgroup_v2() {
            self.cgroup.join(rel)
        } else {
            self.cgroup.join(controller).join(rel)
        }
    }

    /// Cumulative CPU time of cgroup `path` in nanoseconds (`cpuacct.usage` on v1,
    /// `cpu.stat usage_usec` on v2).
    pub fn cgroup_cpu_usage(&self, path: &Path) -> Option<u64> {
        if self.cgroup_v2() {
            return read_keyed(&self.cgroup_dir("", path).join("cpu.stat"))
                .get("usage_usec")
                .map(|us| us.saturating_mul(1000));
        }
        ["cpu,cpuacct", "cpuacct"]
            .iter()
            .find_map(|c| read_u64(&self.cgroup_dir(c, path).join("cpuacct.usage")))
    }

    /// Memory of cgroup `path` (`capacity` is left 0): usage from
    /// `memory.usage_in_bytes` (v1) or `memory.current` (v2), the working set without
    /// inactive file pages, as cAdvisor computes them.
    pub fn cgroup_memory(&self, path: &Path) -> Option<NodeMemory> {
        let dir = self.cgroup_dir("memory", path);
        let v2 = self.cgroup_v2();
        let usage = read_u64(&dir.join(if v2 {
            "memory.current"
        } else {
            "memory.usage_in_bytes"
        }))?;
        let stat = read_keyed(&dir.join("memory.stat"));
        let get =
            |v1: &str, v2_key: &str| stat.get(if v2 { v2_key } else { v1 }).copied().unwrap_or(0);
        Some(NodeMemory {
            capacity: 0,
            usage,
            working_set: usage.saturating_sub(get("total_inactive_file", "inactive_file")),
            rss: get("total_rss", "anon"),
            page_faults: get("total_pgfault", "pgfault"),
            major_page_faults: get("total_pgmajfault", "pgmajfault"),
        })
    }

    /// Boot time (`btime` of `/proc/stat`), seconds since the epoch.
    pub fn boot_time(&self) -> Option<i64> {
        let stat = std::fs::read_to_string(self.proc.join("stat")).ok()?;
        stat.lines()
            .find_map(|l| l.strip_prefix("btime "))
            .and_then(|v| v.trim().parse().ok())
    }

    /// `kernel.pid_max`.
    pub fn max_pid(&self) -> Option<i64> {
        std::fs::read_to_string(self.proc.join("sys/kernel/pid_max"))
            .ok()
            .and_then(|v| v.trim().parse().ok())
    }

    /// Processes now (numeric entries of `/proc`).
    pub fn process_count(&self) -> Option<i64> {
        let entries = std::fs::read_dir(&self.proc).ok()?;
        let count = entries
            .filter_map(Result::ok)
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .bytes()
                    .all(|b| b.is_ascii_digit())
            })
            .count();
        i64::try_from(count).ok()
    }

    /// Interfaces of the kubelet's network namespace (`/proc/net/dev`), loopback excluded.
    pub fn interfaces(&self) -> Vec<InterfaceStats> {
        std::fs::read_to_string(self.proc.join("net/dev"))
            .map(|dev| parse_net_dev(&dev))
            .unwrap_or_default()
    }
}

/// Parses `/proc/net/dev` (two header lines, then `name: rx_bytes packets errs ... tx_bytes
/// packets errs ...`), without `lo`.
pub fn parse_net_dev(dev: &str) -> Vec<InterfaceStats> {
    dev.lines()
        .skip(2)
        .filter_map(|line| {
            let (name, counters) = line.split_once(':')?;
            let name = name.trim();
            let v: Vec<u64> = counters
                .split_whitespace()
                .filter_map(|c| c.parse().ok())
                .collect();
            (name != "lo" && v.len() >= 11).then(|| InterfaceStats {
                name: name.to_owned(),
                rx_bytes: Some(v[0]),
                rx_errors: Some(v[2]),
                tx_bytes: Some(v[8]),
                tx_errors: Some(v[10]),
            })
        })
        .collect()
}

/// Capacity, availability and inodes of the filesystem holding `path` (`statvfs`);
/// `used_bytes` / `inodes_used` are those of the whole filesystem. `None` when `path`
/// cannot be examined.
pub fn filesystem(path: &Path, time: &str) -> Option<FsStats> {
    let st = nix::sys::statvfs::statvfs(path).ok()?;
    let frsize = st.fragment_size() as u64;
    let capacity = st.blocks() as u64 * frsize;
    let free = st.blocks_free() as u64 * frsize;
    let inodes = st.files() as u64;
    let inodes_free = st.files_free() as u64;
    Some(FsStats {
        time: time.to_owned(),
        available_bytes: Some(st.blocks_available() as u64 * frsize),
        capacity_bytes: Some(capacity),
        used_bytes: Some(capacity.saturating_sub(free)),
        inodes_free: Some(inodes_free),
        inodes: Some(inodes),
        inodes_used: Some(inodes.saturating_sub(inodes_free)),
    })
}

/// Bytes (allocated blocks) and inodes under `dir`, `dir` itself included, on `dir`'s own
/// filesystem: mounts below it (a memory-backed emptyDir) are not counted, symlinks are
/// not followed, a hard-linked inode counts once. Absent is zero. The walk keeps its own
/// stack, so a deep tree (a container can make one in a volume) cannot exhaust the
/// kubelet's. Shared by the Summary API and the eviction manager.
pub fn disk_usage(dir: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let Ok(root) = std::fs::symlink_metadata(dir) else {
        return (0, 0);
    };
    let device = root.dev();
    let mut seen = std::collections::HashSet::new();
    let mut bytes = 0;
    let mut inodes = 0;
    let mut stack = vec![(dir.to_owned(), root)];
    while let Some((path, meta)) = stack.pop() {
        if meta.dev() != device || !seen.insert(meta.ino()) {
            continue;
        }
        bytes += meta.blocks() * 512;
        inodes += 1;
        if !meta.is_dir() {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&path) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            if let Ok(meta) = entry.metadata() {
                stack.push((entry.path(), meta));
            }
        }
    }
    (bytes, inodes)
}

fn read_u64(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// `key value` lines (cgroup `memory.stat`, `cpu.stat`).
fn read_keyed(path: &Path) -> HashMap<String, u64> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_owned(), v.trim().parse().ok()?))
        })
        .collect()
}

/// `/proc/meminfo` in bytes (`MemTotal:  16 kB` -> 16384).
fn read_meminfo(path: &Path) -> HashMap<String, u64> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            let mut parts = v.split_whitespace();
            let n: u64 = parts.next()?.parse().ok()?;
            let scale = if parts.next() == Some("kB") { 1024 } else { 1 };
            Some((k.to_owned(), n.saturating_mul(scale)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MEMINFO: &str =
        "MemTotal:       1000 kB\nMemFree:         400 kB\nInactive(file):   50 kB\n";

    fn tree(files: &[(&str, &str)]) -> (tempfile::TempDir, HostPaths) {
        let dir = tempfile::tempdir().unwrap();
        for (path, contents) in files {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, contents).unwrap();
        }
        let paths = HostPaths {
            proc: dir.path().join("proc"),
            cgroup: dir.path().join("cgroup"),
        };
        (dir, paths)
    }

    #[test]
    fn cgroup_v1_root() {
        let (_d, host) = tree(&[
            ("proc/meminfo", MEMINFO),
            ("cgroup/cpu,cpuacct/cpuacct.usage", "123456\n"),
            ("cgroup/memory/memory.usage_in_bytes", "500000\n"),
            (
                "cgroup/memory/memory.stat",
                "total_inactive_file 100000\ntotal_rss 300000\ntotal_pgfault 7\ntotal_pgmajfault 2\n",
            ),
        ]);
        assert!(!host.cgroup_v2());
        assert_eq!(host.cpu_usage_core_nanoseconds(), Some(123456));
        let m = host.memory().unwrap();
        assert_eq!(
            m,
            NodeMemory {
                capacity: 1_024_000,
                usage: 500_000,
                working_set: 400_000,
                rss: 300_000,
                page_faults: 7,
                major_page_faults: 2,
            }
        );
    }

    #[test]
    fn cgroup_v2_root() {
        let (_d, host) = tree(&[
            ("proc/meminfo", MEMINFO),
            ("cgroup/cgroup.controllers", "cpu memory\n"),
            ("cgroup/cpu.stat", "usage_usec 42\nuser_usec 40\n"),
            (
                "cgroup/memory.stat",
                "anon 1000\ninactive_file 2048\npgfault 9\npgmajfault 1\n",
            ),
        ]);
        assert!(host.cgroup_v2());
        assert_eq!(host.cpu_usage_core_nanoseconds(), Some(42_000));
        let m = host.memory().unwrap();
        assert_eq!(m.usage, 600 * 1024);
        assert_eq!(m.working_set, 600 * 1024 - 2048);
        assert_eq!((m.rss, m.page_faults, m.major_page_faults), (1000, 9, 1));
    }

    #[test]
    fn kubepods_cgroup_on_v1_and_v2() {
        let (_d, v1) = tree(&[
            ("cgroup/cpuacct/kubepods/cpuacct.usage", "77\n"),
            ("cgroup/memory/kubepods/memory.usage_in_bytes", "1000\n"),
            (
                "cgroup/memory/kubepods/memory.stat",
                "total_inactive_file 100\ntotal_rss 600\n",
            ),
        ]);
        let pods = Path::new("/kubepods");
        assert_eq!(v1.cgroup_cpu_usage(pods), Some(77));
        let m = v1.cgroup_memory(pods).unwrap();
        assert_eq!((m.usage, m.working_set, m.rss), (1000, 900, 600));
        let (_d, v2) = tree(&[
            ("cgroup/cgroup.controllers", "cpu memory\n"),
            ("cgroup/kubepods/cpu.stat", "usage_usec 5\n"),
            ("cgroup/kubepods/memory.current", "2000\n"),
            (
                "cgroup/kubepods/memory.stat",
                "inactive_file 500\nanon 1200\npgfault 3\n",
            ),
        ]);
        assert_eq!(v2.cgroup_cpu_usage(pods), Some(5000));
        let m = v2.cgroup_memory(pods).unwrap();
        assert_eq!(
            (m.usage, m.working_set, m.rss, m.page_faults),
            (2000, 1500, 1200, 3)
        );
        assert!(v2.cgroup_memory(Path::new("/absent")).is_none());
    }

    #[test]
    fn proc_stat_fallback_boot_time_and_net_dev() {
        let (_d, host) = tree(&[(
            "proc/stat",
            "cpu  10 1 5 1000 7 2 3 4 0 0\ncpu0 1 1 1 1 1 1 1 1\nbtime 1700000000\n",
        )]);
        // user+nice+system+irq+softirq+steal = 10+1+5+2+3+4 ticks of 10 ms.
        assert_eq!(host.cpu_usage_core_nanoseconds(), Some(25 * 10_000_000));
        assert_eq!(host.boot_time(), Some(1_700_000_000));
        let dev = "Inter-|   Receive  |  Transmit\n face |bytes packets errs drop fifo frame compressed multicast|bytes packets errs drop fifo colls carrier compressed\n    lo: 5 1 0 0 0 0 0 0 5 1 0 0 0 0 0 0\n  eth0: 100 2 3 0 0 0 0 0 200 4 5 0 0 0 0 0\n";
        let ifs = parse_net_dev(dev);
        assert_eq!(ifs.len(), 1);
        assert_eq!(ifs[0].name, "eth0");
        assert_eq!(
            (
                ifs[0].rx_bytes,
                ifs[0].rx_errors,
                ifs[0].tx_bytes,
                ifs[0].tx_errors
            ),
            (Some(100), Some(3), Some(200), Some(5))
        );
    }
}
