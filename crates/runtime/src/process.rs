//! Host processes identified across PID reuse: a PID plus the process start time
//! (`/proc/<pid>/stat` field 22, in clock ticks since boot), the pair containerd and the
//! kubelet also use to tell a process from a later one that got the same PID.

/// A process that was alive when it was recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProcessId {
    /// Host PID.
    pub pid: i32,
    /// Start time, clock ticks after boot (`/proc/<pid>/stat` field 22).
    pub start_time: u64,
}

impl ProcessId {
    /// The live process `pid` with its start time; `None` when there is no such process.
    pub fn of(pid: i32) -> Option<ProcessId> {
        let stat = read_stat(pid)?;
        Some(ProcessId {
            pid,
            start_time: stat.start_time,
        })
    }

    /// Whether this very process still runs: the PID exists, has the recorded start time
    /// and is not a zombie (a zombie has exited and only waits to be reaped).
    pub fn is_alive(&self) -> bool {
        read_stat(self.pid)
            .is_some_and(|stat| stat.start_time == self.start_time && stat.state != 'Z')
    }

    /// Waits up to `timeout` for this very process to exit (a zombie has exited); returns
    /// whether it did. Works for any process, not only children: a pidfd becomes readable
    /// when its process exits.
    pub async fn wait_exit(&self, timeout: std::time::Duration) -> bool {
        use rustix::process::{Pid, PidfdFlags, pidfd_open};
        let Some(pid) = Pid::from_raw(self.pid) else {
            return true;
        };
        let Ok(pidfd) = pidfd_open(pid, PidfdFlags::NONBLOCK) else {
            return true;
        };
        if !self.is_alive() {
            return true;
        }
        // SAFETY: the AsyncFd owns the pidfd, so it stays open for as long as it is
        // registered.
        let registered = unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(pidfd, tokio::io::Interest::READABLE)
        };
        let Ok(pidfd) = registered else {
            return false;
        };
        tokio::time::timeout(timeout, pidfd.readable())
            .await
            .is_ok()
    }

    /// Sends signal number `signal` to this very process, without a PID-reuse race: a
    /// pidfd pins the process, then its start time is checked, then the signal goes
    /// through the pidfd (`pidfd_send_signal(2)`). Returns `Ok(false)` when the process is
    /// gone (or a zombie); errors for an unknown signal number or a refused signal.
    pub fn signal(&self, signal: i32) -> std::io::Result<bool> {
        use rustix::io::Errno;
        use rustix::process::{Pid, PidfdFlags, Signal, pidfd_open, pidfd_send_signal};
        let sig = Signal::from_named_raw(signal).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("unknown signal {signal}"),
            )
        })?;
        let Some(pid) = Pid::from_raw(self.pid) else {
            return Ok(false);
        };
        let pidfd = match pidfd_open(pid, PidfdFlags::empty()) {
            Ok(fd) => fd,
            Err(Errno::SRCH) => return Ok(false),
            Err(err) => return Err(err.into()),
        };
        if !self.is_alive() {
            return Ok(false);
        }
        match pidfd_send_signal(&pidfd, sig) {
            Ok(()) => Ok(true),
            Err(Errno::SRCH) => Ok(false),
            Err(err) => Err(err.into()),
        }
    }
}

/// The fields of `/proc/<pid>/stat` the runtime uses.
#[derive(Debug, PartialEq)]
struct Stat {
    /// Field 3: `R`, `S`, `D`, `Z`, ...
    state: char,
    /// Field 22.
    start_time: u64,
}

fn read_stat(pid: i32) -> Option<Stat> {
    if pid <= 0 {
        return None;
    }
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Parses a stat line. Field 2 (the command name in parentheses) may itself contain spaces
/// and parentheses, so fields are counted from the last `)`.
fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    // `fields` now stands after field 3; field 22 is 19 further on.
    let start_time = fields.nth(18)?.parse().ok()?;
    Some(Stat { state, start_time })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_odd_command_names() {
        let line = "4242 (a) b (c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 100 18446744073709551615";
        assert_eq!(
            parse_stat(line),
            Some(Stat {
                state: 'S',
                start_time: 987654
            })
        );
        assert_eq!(parse_stat("1 (x) Z 0"), None);
    }

    #[test]
    fn recognizes_this_process_and_not_a_reused_pid() {
        let me = ProcessId::of(std::process::id() as i32).unwrap();
        assert!(me.is_alive());
        let other = ProcessId {
            start_time: me.start_time + 1,
            ..me
        };
        assert!(!other.is_alive());
        assert_eq!(ProcessId::of(0), None);
    }

    #[test]
    fn signals_only_the_recorded_process() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let id = ProcessId::of(child.id() as i32).unwrap();
        let reused = ProcessId {
            start_time: id.start_time + 1,
            ..id
        };
        assert!(!reused.signal(libc::SIGKILL).unwrap(), "another start time");
        assert!(id.is_alive());
        assert!(id.signal(0).is_err(), "signal 0 is not a signal");
        assert!(id.signal(libc::SIGKILL).unwrap());
        let status = child.wait().unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(libc::SIGKILL)
        );
        assert!(!id.signal(libc::SIGKILL).unwrap(), "reaped: gone");
    }

    #[tokio::test]
    async fn waits_for_the_exit_of_any_process() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let id = ProcessId::of(child.id() as i32).unwrap();
        let short = std::time::Duration::from_millis(50);
        assert!(!id.wait_exit(short).await, "still running");
        let waiter =
            tokio::spawn(async move { id.wait_exit(std::time::Duration::from_secs(10)).await });
        assert!(id.signal(libc::SIGKILL).unwrap());
        assert!(
            waiter.await.unwrap(),
            "the exit (a zombie, not reaped yet) ends the wait"
        );
        child.wait().unwrap();
        assert!(id.wait_exit(short).await, "reaped: gone");
    }
}
