//! The few cgroup facts the runtime needs: OOM kills of a container and removal of the
//! per-sandbox parent cgroups it made up. cgroupfs layout, v1, v2 or hybrid.

use std::path::{Path, PathBuf};

/// Mount point of the cgroup hierarchies.
const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// Every hierarchy directory that may hold `relative` (`/sys/fs/cgroup` itself for pure v2,
/// each controller directory and `unified` for v1 and hybrid).
fn hierarchies() -> Vec<PathBuf> {
    let mut out = vec![PathBuf::from(CGROUP_ROOT)];
    if let Ok(entries) = std::fs::read_dir(CGROUP_ROOT) {
        out.extend(entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()));
    }
    out
}

fn join(base: &Path, relative: &Path) -> PathBuf {
    base.join(relative.strip_prefix("/").unwrap_or(relative))
}

/// Whether the memory cgroup at `relative` (a cgroupsPath) recorded an OOM kill:
/// `oom_kill N` in v1 `memory.oom_control` or v2 `memory.events`, with N > 0.
pub fn oom_killed(relative: &Path) -> bool {
    hierarchies().iter().any(|base| {
        ["memory.oom_control", "memory.events"].iter().any(|file| {
            std::fs::read_to_string(join(base, relative).join(file))
                .is_ok_and(|text| oom_kill_count(&text) > 0)
        })
    })
}

fn oom_kill_count(text: &str) -> u64 {
    text.lines()
        .find_map(|line| line.strip_prefix("oom_kill "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// Whether the OCI runtime can set hugepage limits here: a v1 `hugetlb` hierarchy, or on a
/// pure cgroup v2 host a `hugetlb` controller. (On a hybrid host runc manages v1 only, so a
/// hugetlb controller that exists only in the v2 hierarchy does not count.)
pub fn hugetlb_available() -> bool {
    let root = Path::new(CGROUP_ROOT);
    match std::fs::read_to_string(root.join("cgroup.controllers")) {
        Ok(controllers) => controllers.split_whitespace().any(|c| c == "hugetlb"),
        Err(_) => root.join("hugetlb").is_dir(),
    }
}

/// Removes the (empty) cgroup directory `relative` from every hierarchy; absent is fine.
/// Non-empty or busy cgroups are logged and left.
pub fn remove(relative: &Path) {
    for base in hierarchies() {
        let dir = join(&base, relative);
        match std::fs::remove_dir(&dir) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                tracing::warn!(dir = %dir.display(), "removing cgroup: {err}");
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn oom_kill_counts() {
        assert_eq!(
            super::oom_kill_count("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n"),
            2
        );
        assert_eq!(
            super::oom_kill_count("low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n"),
            0
        );
    }
}
