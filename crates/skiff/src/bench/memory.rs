//! Memory of a CRI runtime and of its per-pod processes, from `/proc`.
//!
//! - The runtime is the process serving the CRI socket, found with `SO_PEERCRED`.
//! - Its per-pod processes are its shims and what runs under them except the benchmark's
//!   own containers: the shims are the processes (other than the runtime and this
//!   benchmark) whose command line mentions the directory holding the CRI socket
//!   (`skiff shim` names its bundle and runc root under the state directory, next to
//!   `skiff.sock`; `containerd-shim-runc-v2` names the socket with `-address`); to them are
//!   added all their descendants — sandbox (pause) processes, monitors — except the
//!   benchmark containers' processes (command line [`CONTAINER_COMMAND`]). Transient
//!   children of the runtime itself (runc, CNI plugins) are not counted.
//!
//! The same code measures a `skiff kubelet` node in `skiff-bench-static-pods` (testkit),
//! which includes this file: there the "runtime" processes are the kubelet (and
//! containerd) and the per-pod processes are found under the node's directory
//! ([`per_pod_processes`]).
//!
//! RSS is `VmRSS` of `/proc/<pid>/status`; PSS (shared pages divided among the processes
//! mapping them, so the shims' shared binary is not counted once per shim) is `Pss` of
//! `/proc/<pid>/smaps_rollup`. Sums over processes, in KiB.

use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;

use anyhow::{Context, bail};

/// The command line of every benchmark container (its process is not runtime overhead).
pub const CONTAINER_COMMAND: [&str; 2] = ["sleep", "86400"];

/// RSS and PSS of a set of processes, in KiB.
#[derive(Debug, Clone, Copy, Default)]
pub struct Memory {
    pub rss_kib: u64,
    pub pss_kib: u64,
}

impl std::ops::AddAssign for Memory {
    fn add_assign(&mut self, other: Memory) {
        self.rss_kib += other.rss_kib;
        self.pss_kib += other.pss_kib;
    }
}

/// Memory with `pods` pods running.
pub struct Sample {
    pub pods: usize,
    pub runtime: Memory,
    /// How many per-pod processes there were (module docs).
    pub per_pod_processes: usize,
    pub per_pod: Memory,
}

/// The PID of the process that accepted a connection on `socket` (`SO_PEERCRED`).
pub fn peer_pid(socket: &Path) -> anyhow::Result<u32> {
    let stream = UnixStream::connect(socket)?;
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes of the sizes given.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error()).context("getsockopt(SO_PEERCRED)");
    }
    u32::try_from(cred.pid).context("no peer PID")
}

/// One process from `/proc`.
struct Process {
    ppid: u32,
    cmdline: Vec<String>,
}

fn processes() -> BTreeMap<u32, Process> {
    let mut found = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for pid in entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
    {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`; comm may hold spaces and parentheses.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|raw| {
                raw.split(|b| *b == 0)
                    .filter(|a| !a.is_empty())
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect()
            })
            .unwrap_or_default();
        found.insert(pid, Process { ppid, cmdline });
    }
    found
}

/// `VmRSS` and `Pss` of `pid` (zeros for a process that is gone).
pub fn memory_of(pid: u32) -> Memory {
    Memory {
        rss_kib: rss_kib(pid).unwrap_or(0),
        pss_kib: proc_kib(pid, "smaps_rollup", "Pss:").unwrap_or(0),
    }
}

/// `VmRSS` of `pid`, in KiB; None for a process that is gone (or a zombie, which has
/// none).
pub fn rss_kib(pid: u32) -> Option<u64> {
    proc_kib(pid, "status", "VmRSS:")
}

/// The first number of the line of `/proc/<pid>/<file>` that starts with `name`.
fn proc_kib(pid: u32, file: &str, name: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/{file}")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// The per-pod processes: those whose command line mentions `dir` (other than
/// `runtime_pids` and this process) with their descendants, except the benchmark
/// containers' processes (module docs).
pub fn per_pod_processes(dir: &Path, runtime_pids: &[u32]) -> BTreeSet<u32> {
    let dir = dir.display().to_string();
    let all = processes();
    let me = std::process::id();
    let mut chosen: BTreeSet<u32> = all
        .iter()
        .filter(|(pid, p)| {
            !runtime_pids.contains(pid) && **pid != me && p.cmdline.iter().any(|a| a.contains(&dir))
        })
        .map(|(pid, _)| *pid)
        .collect();
    // Add descendants until nothing changes (the map is small: one pass per tree level).
    loop {
        let before = chosen.len();
        for (pid, p) in &all {
            if chosen.contains(&p.ppid) && !runtime_pids.contains(pid) {
                chosen.insert(*pid);
            }
        }
        if chosen.len() == before {
            break;
        }
    }
    chosen.retain(|pid| all.get(pid).is_some_and(|p| p.cmdline != CONTAINER_COMMAND));
    chosen
}

/// Measures the runtime and its per-pod processes with `pods` pods running.
pub fn sample(runtime_pid: u32, socket: &Path, pods: usize) -> anyhow::Result<Sample> {
    let runtime = memory_of(runtime_pid);
    if runtime.rss_kib == 0 {
        bail!("runtime process {runtime_pid} is gone");
    }
    let Some(dir) = socket.parent() else {
        bail!("{} has no parent directory", socket.display());
    };
    let chosen = per_pod_processes(dir, &[runtime_pid]);
    let mut per_pod = Memory::default();
    for pid in &chosen {
        per_pod += memory_of(*pid);
    }
    Ok(Sample {
        pods,
        runtime,
        per_pod_processes: chosen.len(),
        per_pod,
    })
}
