//! Small system helpers shared by the modules: free ports, random names, log tails,
//! signals, the HTTP client.

use anyhow::Context as _;
use std::fs::File;
use std::io::Read;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

const HTTP_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const HTTP_TIMEOUT: Duration = Duration::from_secs(60);

/// A blocking HTTP client for loopback servers (the registry, the kubelet's read-only
/// port): every status is returned as a response (callers check it), no proxy from the
/// environment, 5 s to connect and 60 s per request.
pub(crate) fn http_agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .proxy(None)
        .timeout_connect(Some(HTTP_CONNECT_TIMEOUT))
        .timeout_global(Some(HTTP_TIMEOUT))
        .build()
        .into()
}

/// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then released).
pub(crate) fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// `N` random bytes from /dev/urandom.
pub(crate) fn random_bytes<const N: usize>() -> anyhow::Result<[u8; N]> {
    let mut buf = [0u8; N];
    File::open("/dev/urandom")?.read_exact(&mut buf)?;
    Ok(buf)
}

/// How many lines of a log failure messages quote.
pub(crate) const LOG_TAIL_LINES: usize = 60;

/// A whole (log) file as lossy UTF-8; empty if unreadable.
pub(crate) fn read_lossy(path: &Path) -> String {
    std::fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// The last `lines` lines of a (log) file, or a note saying why it could not be read.
pub(crate) fn tail(path: &Path, lines: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(e) => format!("(cannot read {}: {e})", path.display()),
    }
}

/// Sends `signal` to `pid`; errors (no such process) are ignored.
pub(crate) fn signal(pid: u32, signal: libc::c_int) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        // SAFETY: kill(2) has no memory-safety preconditions.
        unsafe { libc::kill(pid, signal) };
    }
}

/// Sends SIGTERM, waits up to `grace`, then SIGKILLs; returns the exit status.
pub(crate) fn terminate(child: &mut Child, grace: Duration) -> std::io::Result<ExitStatus> {
    if let Some(status) = child.try_wait()? {
        return Ok(status);
    }
    signal(child.id(), libc::SIGTERM);
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    child.wait()
}

/// `VmRSS` of process `pid` (`/proc/<pid>/status`), in KiB. Errors: the process is gone
/// or its status has no `VmRSS` (a zombie).
pub fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    status_kib(pid, ["VmRSS"]).map(|[all]| all)
}

/// `VmRSS` of process `pid` and its parts, in KiB, from one reading of
/// `/proc/<pid>/status`: (`VmRSS`, `RssAnon`, `RssFile`). `RssAnon` is the heap and
/// stacks; `RssFile` the mapped pages of files, mostly the executable's code, which a
/// second process of the same binary shares. Errors: as [`rss_kib`].
pub fn rss_parts_kib(pid: u32) -> anyhow::Result<(u64, u64, u64)> {
    status_kib(pid, ["VmRSS", "RssAnon", "RssFile"]).map(|[all, anon, file]| (all, anon, file))
}

/// The values of `keys` in `/proc/<pid>/status`, in KiB, in the order asked.
fn status_kib<const N: usize>(pid: u32, keys: [&str; N]) -> anyhow::Result<[u64; N]> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    let mut values = [0; N];
    for (value, key) in values.iter_mut().zip(keys) {
        *value = status
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .with_context(|| format!("no {key} in /proc/{pid}/status"))?;
    }
    Ok(values)
}
