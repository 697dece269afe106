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
}
