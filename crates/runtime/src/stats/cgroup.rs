//! CPU, memory and process counters of one cgroup, from cgroup v1 (`cpuacct`, `memory`,
//! `pids` controllers) or cgroup v2 (`cpu.stat`, `memory.current`, `memory.stat`,
//! `pids.current`), the layout being detected at run time.
//!
//! The derived values follow containerd's CRI plugin (and cAdvisor): the working set is
//! the usage minus the inactive file cache, the RSS is v1 `total_rss` or v2 `anon`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Mount point of the cgroup hierarchies.
const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// A v1 memory limit at or above this means "no limit" (the kernel reports
/// `PAGE_COUNTER_MAX` pages, about 2^63 bytes, rounded down to the page size).
const V1_UNLIMITED: u64 = 1 << 62;

/// Which cgroup layout the node uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layout {
    /// cgroup v1 (or hybrid): one hierarchy per controller under the root.
    V1 { root: PathBuf },
    /// cgroup v2: one unified hierarchy at the root.
    V2 { root: PathBuf },
}

impl Layout {
    /// The node's layout: v2 when `/sys/fs/cgroup` is itself a cgroup2 mount (it has
    /// `cgroup.controllers`), else v1. A hybrid node (v2 mounted at `unified` with few or
    /// no controllers) counts as v1, where its CPU and memory controllers live.
    pub fn detect() -> Self {
        let root = PathBuf::from(CGROUP_ROOT);
        if root.join("cgroup.controllers").is_file() {
            Layout::V2 { root }
        } else {
            Layout::V1 { root }
        }
    }

    /// Reads the counters of the cgroup at `relative` (a cgroupfs path such as a container's
    /// `linux.cgroupsPath`). Counters that cannot be read are `None`: a cgroup that is gone
    /// gives an empty sample, not an error.
    pub fn sample(&self, relative: &Path) -> Sample {
        let relative = relative.strip_prefix("/").unwrap_or(relative);
        match self {
            Layout::V1 { root } => sample_v1(|controller, file| {
                v1_controller_dirs(controller).iter().find_map(|dir| {
                    std::fs::read_to_string(root.join(dir).join(relative).join(file)).ok()
                })
            }),
            Layout::V2 { root } => {
                sample_v2(|file| std::fs::read_to_string(root.join(relative).join(file)).ok())
            }
        }
    }
}

/// A v1 controller the stats read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Controller {
    /// `cpuacct` (often co-mounted as `cpu,cpuacct`).
    Cpuacct,
    /// `memory`.
    Memory,
    /// `pids`.
    Pids,
}

/// Directory names under the cgroup root that may hold a v1 controller's hierarchy.
fn v1_controller_dirs(controller: Controller) -> &'static [&'static str] {
    match controller {
        Controller::Cpuacct => &["cpuacct", "cpu,cpuacct", "cpuacct,cpu"],
        Controller::Memory => &["memory"],
        Controller::Pids => &["pids"],
    }
}

/// One reading of a cgroup's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sample {
    /// Cumulative CPU time of all tasks, nanoseconds.
    pub cpu_usage_ns: Option<u64>,
    /// Memory counters.
    pub memory: Option<Memory>,
    /// Number of tasks (`pids.current`).
    pub pids: Option<u64>,
}

/// Memory counters of a cgroup, in bytes (faults are counts).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Memory {
    /// Total usage including the page cache (v1 `memory.usage_in_bytes`, v2
    /// `memory.current`).
    pub usage: u64,
    /// Usage minus the inactive file cache, floored at 0.
    pub working_set: u64,
    /// Anonymous memory (v1 `total_rss`, v2 `anon`).
    pub rss: u64,
    /// Page faults (`pgfault`), cumulative.
    pub page_faults: u64,
    /// Major page faults (`pgmajfault`), cumulative.
    pub major_page_faults: u64,
    /// The memory limit, `None` when unlimited.
    pub limit: Option<u64>,
}

impl Memory {
    /// Bytes left before the limit (limit − working set, floored at 0); `None` when
    /// unlimited (cAdvisor's `AvailableBytes`).
    pub fn available(&self) -> Option<u64> {
        self.limit
            .map(|limit| limit.saturating_sub(self.working_set))
    }
}

/// A v1 sample through `read(controller, file)` (the file's text, `None` when unreadable).
pub fn sample_v1(read: impl Fn(Controller, &str) -> Option<String>) -> Sample {
    let cpu_usage_ns = read(Controller::Cpuacct, "cpuacct.usage").and_then(|t| parse_u64(&t));
    let memory = read(Controller::Memory, "memory.usage_in_bytes")
        .and_then(|t| parse_u64(&t))
        .map(|usage| {
            let stat = read(Controller::Memory, "memory.stat").unwrap_or_default();
            let stat = flat_keyed(&stat);
            let field = |key: &str| stat.get(key).copied().unwrap_or(0);
            let limit = read(Controller::Memory, "memory.limit_in_bytes")
                .and_then(|t| parse_u64(&t))
                .filter(|&limit| limit < V1_UNLIMITED);
            Memory {
                usage,
                working_set: usage.saturating_sub(field("total_inactive_file")),
                rss: field("total_rss"),
                page_faults: field("total_pgfault"),
                major_page_faults: field("total_pgmajfault"),
                limit,
            }
        });
    let pids = read(Controller::Pids, "pids.current").and_then(|t| parse_u64(&t));
    Sample {
        cpu_usage_ns,
        memory,
        pids,
    }
}

/// A v2 sample through `read(file)` (the file's text in the cgroup directory, `None` when
/// unreadable).
pub fn sample_v2(read: impl Fn(&str) -> Option<String>) -> Sample {
    let cpu_usage_ns = read("cpu.stat")
        .and_then(|t| flat_keyed(&t).get("usage_usec").copied())
        .map(|usec| usec.saturating_mul(1000));
    let memory = read("memory.current")
        .and_then(|t| parse_u64(&t))
        .map(|usage| {
            let stat = read("memory.stat").unwrap_or_default();
            let stat = flat_keyed(&stat);
            let field = |key: &str| stat.get(key).copied().unwrap_or(0);
            // "max" (no limit) does not parse as a number.
            let limit = read("memory.max").and_then(|t| parse_u64(&t));
            Memory {
                usage,
                working_set: usage.saturating_sub(field("inactive_file")),
                rss: field("anon"),
                page_faults: field("pgfault"),
                major_page_faults: field("pgmajfault"),
                limit,
            }
        });
    let pids = read("pids.current").and_then(|t| parse_u64(&t));
    Sample {
        cpu_usage_ns,
        memory,
        pids,
    }
}

fn parse_u64(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// Parses a "flat keyed" cgroup file (`key value` per line, as `memory.stat` and
/// `cpu.stat`); lines that do not parse are skipped.
fn flat_keyed(text: &str) -> HashMap<&str, u64> {
    text.lines()
        .filter_map(|line| {
            let (key, value) = line.split_once(' ')?;
            Some((key, value.trim().parse().ok()?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1_MEMORY_STAT: &str = "cache 4096\nrss 8192\ninactive_file 1000\n\
        total_cache 40960\ntotal_rss 81920\ntotal_inactive_file 10000\n\
        total_pgfault 321\ntotal_pgmajfault 7\n";

    const V2_MEMORY_STAT: &str = "anon 2093056\nfile 12288\nkernel 311296\n\
        inactive_file 4096\nactive_file 8192\npgfault 1500\npgmajfault 3\n";

    fn v1(files: &[(Controller, &str, &str)]) -> Sample {
        sample_v1(|controller, name| {
            files
                .iter()
                .find(|(c, n, _)| *c == controller && *n == name)
                .map(|(_, _, text)| text.to_string())
        })
    }

    fn v2(files: &[(&str, &str)]) -> Sample {
        sample_v2(|name| {
            files
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, text)| text.to_string())
        })
    }

    #[test]
    fn v1_limited_cgroup() {
        let sample = v1(&[
            (Controller::Cpuacct, "cpuacct.usage", "123456789\n"),
            (Controller::Memory, "memory.usage_in_bytes", "200000\n"),
            (Controller::Memory, "memory.limit_in_bytes", "1048576\n"),
            (Controller::Memory, "memory.stat", V1_MEMORY_STAT),
            (Controller::Pids, "pids.current", "3\n"),
        ]);
        let memory = sample.memory.clone().unwrap();
        assert_eq!(sample.cpu_usage_ns, Some(123_456_789));
        assert_eq!(sample.pids, Some(3));
        assert_eq!(memory.usage, 200_000);
        assert_eq!(memory.working_set, 190_000, "usage - total_inactive_file");
        assert_eq!(memory.rss, 81_920, "total_rss, not rss");
        assert_eq!((memory.page_faults, memory.major_page_faults), (321, 7));
        assert_eq!(memory.limit, Some(1_048_576));
        assert_eq!(memory.available(), Some(1_048_576 - 190_000));
    }

    #[test]
    fn v1_unlimited_and_missing_controllers() {
        let sample = v1(&[
            (Controller::Memory, "memory.usage_in_bytes", "5000\n"),
            (
                Controller::Memory,
                "memory.limit_in_bytes",
                "9223372036854771712\n",
            ),
            (
                Controller::Memory,
                "memory.stat",
                "total_inactive_file 9000\n",
            ),
        ]);
        let memory = sample.memory.unwrap();
        assert_eq!(memory.limit, None);
        assert_eq!(memory.available(), None);
        assert_eq!(memory.working_set, 0, "floored at 0");
        assert_eq!((sample.cpu_usage_ns, sample.pids), (None, None));
    }

    #[test]
    fn v2_limited_cgroup() {
        let sample = v2(&[
            (
                "cpu.stat",
                "usage_usec 2500\nuser_usec 2000\nsystem_usec 500\n",
            ),
            ("memory.current", "3000000\n"),
            ("memory.max", "4194304\n"),
            ("memory.stat", V2_MEMORY_STAT),
            ("pids.current", "2\n"),
        ]);
        let memory = sample.memory.clone().unwrap();
        assert_eq!(sample.cpu_usage_ns, Some(2_500_000));
        assert_eq!(sample.pids, Some(2));
        assert_eq!(memory.working_set, 3_000_000 - 4096);
        assert_eq!(memory.rss, 2_093_056, "anon");
        assert_eq!((memory.page_faults, memory.major_page_faults), (1500, 3));
        assert_eq!(memory.available(), Some(4_194_304 - (3_000_000 - 4096)));
    }

    #[test]
    fn v2_unlimited_and_gone() {
        let sample = v2(&[
            ("memory.current", "100\n"),
            ("memory.max", "max\n"),
            ("memory.stat", V2_MEMORY_STAT),
        ]);
        assert_eq!(sample.memory.unwrap().limit, None);
        assert_eq!(v2(&[]), Sample::default());
    }

    #[test]
    fn this_process_cgroup_is_readable() {
        // The detected layout reads real counters of the root cgroup's own files or of
        // this process's cgroup on either layout.
        let layout = Layout::detect();
        let relative = own_memory_cgroup(&layout);
        let sample = layout.sample(Path::new(&relative));
        assert!(
            sample.memory.is_some_and(|m| m.usage > 0),
            "{layout:?} {relative}"
        );
    }

    /// The memory cgroup of this process, from `/proc/self/cgroup`.
    fn own_memory_cgroup(layout: &Layout) -> String {
        let text = std::fs::read_to_string("/proc/self/cgroup").unwrap();
        text.lines()
            .filter_map(|line| {
                let mut parts = line.splitn(3, ':');
                let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
                let wanted = match layout {
                    Layout::V1 { .. } => controllers.split(',').any(|c| c == "memory"),
                    Layout::V2 { .. } => controllers.is_empty(),
                };
                wanted.then(|| path.to_string())
            })
            .next()
            .unwrap()
    }
}
