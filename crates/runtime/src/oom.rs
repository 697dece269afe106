//! OOM score adjustment limits, after containerd's `restrict_oom_score_adj`.
//!
//! Lowering `oom_score_adj` below the current value needs `CAP_SYS_RESOURCE`. Without it,
//! runc's write would fail and the container would not start, so the runtime never asks for
//! less than its own score.

/// Capability number of `CAP_SYS_RESOURCE` (linux/capability.h).
const CAP_SYS_RESOURCE: u32 = 24;

/// The lowest `oom_score_adj` this process may request for its children: `None` when it holds
/// `CAP_SYS_RESOURCE` (any value allowed), otherwise its own `/proc/self/oom_score_adj`.
pub fn floor() -> Option<i32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    if has_capability(&status, CAP_SYS_RESOURCE) {
        return None;
    }
    std::fs::read_to_string("/proc/self/oom_score_adj")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Clamps a requested score to `floor` (see [`floor`]) and to the kernel's -1000..=1000 range.
pub fn restrict(requested: i64, floor: Option<i32>) -> i32 {
    let value = requested.clamp(-1000, 1000) as i32;
    match floor {
        Some(min) if value < min => min,
        _ => value,
    }
}

/// Whether the `CapEff:` line of a `/proc/<pid>/status` text has capability bit `cap`.
fn has_capability(status: &str, cap: u32) -> bool {
    status
        .lines()
        .find_map(|line| line.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << cap) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cap_eff() {
        let status = "Name:\tx\nCapEff:\t000001ffffffffff\n";
        assert!(has_capability(status, CAP_SYS_RESOURCE));
        let status = "CapEff:\t000001fffeffffff\n";
        assert!(!has_capability(status, CAP_SYS_RESOURCE));
    }

    #[test]
    fn restricts_to_floor() {
        assert_eq!(restrict(-997, Some(0)), 0);
        assert_eq!(restrict(1000, Some(0)), 1000);
        assert_eq!(restrict(-997, None), -997);
        assert_eq!(restrict(5000, None), 1000);
    }
}
