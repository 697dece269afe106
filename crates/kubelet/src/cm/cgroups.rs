//! Pod cgroups (upstream `pkg/kubelet/cm/pod_container_manager_linux.go`, cgroupfs driver):
//! `<cgroup-root>/kubepods[/<qos>]/pod<uid>` in every mounted hierarchy.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use super::qos::QosClass;

/// The cgroup parent of a pod, as passed to the runtime in the sandbox config:
/// `<cgroup_root>/kubepods/besteffort/pod<uid>`, `.../burstable/pod<uid>`, or
/// `<cgroup_root>/kubepods/pod<uid>` for Guaranteed pods.
pub fn pod_cgroup_parent(cgroup_root: &Path, qos: QosClass, uid: &str) -> PathBuf {
    let kubepods = Path::new("/").join(cgroup_root).join("kubepods");
    let qos_dir = match qos {
        QosClass::Guaranteed => kubepods,
        QosClass::Burstable => kubepods.join("burstable"),
        QosClass::BestEffort => kubepods.join("besteffort"),
    };
    qos_dir.join(format!("pod{uid}"))
}

/// Removes the pod cgroup `cgroup` (an absolute cgroup path) from every cgroup v1
/// controller and the v2 unified hierarchy, children first. Absent directories are fine.
///
/// Errors list the directories that could not be removed (e.g. still holding processes).
pub fn remove_pod_cgroup(cgroup: &Path) -> anyhow::Result<()> {
    let relative = cgroup.strip_prefix("/").unwrap_or(cgroup);
    let mut failures = Vec::new();
    for mount in cgroup_mounts()? {
        if let Err(e) = remove_tree(&mount.join(relative)) {
            failures.push(e);
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        anyhow::bail!(
            "removing pod cgroup {}: {}",
            cgroup.display(),
            failures.join("; ")
        )
    }
}

/// Mount points of all `cgroup` and `cgroup2` filesystems, from /proc/self/mountinfo.
fn cgroup_mounts() -> anyhow::Result<Vec<PathBuf>> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")?;
    Ok(parse_cgroup_mounts(&mountinfo))
}

fn parse_cgroup_mounts(mountinfo: &str) -> Vec<PathBuf> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let (pre, post) = line.split_once(" - ")?;
            let fstype = post.split_whitespace().next()?;
            let mount_point = pre.split_whitespace().nth(4)?;
            matches!(fstype, "cgroup" | "cgroup2").then(|| PathBuf::from(mount_point))
        })
        .collect()
}

/// Removes a cgroup directory and its child cgroups, deepest first.
fn remove_tree(dir: &Path) -> Result<(), String> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("{}: {e}", dir.display())),
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            remove_tree(&entry.path())?;
        }
    }
    match std::fs::remove_dir(dir) {
        Err(e) if e.kind() != ErrorKind::NotFound => Err(format!("{}: {e}", dir.display())),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_parent_per_qos() {
        let root = Path::new("/");
        assert_eq!(
            pod_cgroup_parent(root, QosClass::BestEffort, "u1"),
            Path::new("/kubepods/besteffort/podu1")
        );
        assert_eq!(
            pod_cgroup_parent(Path::new("/skiff"), QosClass::Burstable, "u1"),
            Path::new("/skiff/kubepods/burstable/podu1")
        );
        assert_eq!(
            pod_cgroup_parent(root, QosClass::Guaranteed, "u1"),
            Path::new("/kubepods/podu1")
        );
    }

    #[test]
    fn finds_v1_and_v2_mounts() {
        let info = "\
30 24 0:26 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755
31 30 0:27 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw
33 30 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
40 24 0:40 / /proc rw - proc proc rw";
        assert_eq!(
            parse_cgroup_mounts(info),
            vec![
                PathBuf::from("/sys/fs/cgroup/unified"),
                PathBuf::from("/sys/fs/cgroup/cpu,cpuacct")
            ]
        );
    }

    #[test]
    fn remove_tree_removes_children_first_and_accepts_absent() {
        let dir = tempfile::tempdir().unwrap();
        let pod = dir.path().join("podx");
        std::fs::create_dir_all(pod.join("c1/sub")).unwrap();
        std::fs::create_dir_all(pod.join("c2")).unwrap();
        assert_eq!(remove_tree(&pod), Ok(()));
        assert!(!pod.exists());
        assert_eq!(remove_tree(&pod), Ok(()));
    }
}
