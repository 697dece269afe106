//! Cgroup names of the QoS tiers and pods (upstream `pkg/kubelet/cm`, cgroupfs driver):
//! `<cgroup-root>/kubepods[/<qos>]/pod<uid>`.

use std::path::{Path, PathBuf};

use super::qos::QosClass;

/// The cgroup of a QoS tier: `<cgroup_root>/kubepods` for Guaranteed,
/// `<cgroup_root>/kubepods/burstable` and `<cgroup_root>/kubepods/besteffort`.
pub fn qos_cgroup(cgroup_root: &Path, qos: QosClass) -> PathBuf {
    let kubepods = Path::new("/").join(cgroup_root).join("kubepods");
    match qos {
        QosClass::Guaranteed => kubepods,
        QosClass::Burstable => kubepods.join("burstable"),
        QosClass::BestEffort => kubepods.join("besteffort"),
    }
}

/// The cgroup parent of a pod, as passed to the runtime in the sandbox config:
/// `<cgroup_root>/kubepods/besteffort/pod<uid>`, `.../burstable/pod<uid>`, or
/// `<cgroup_root>/kubepods/pod<uid>` for Guaranteed pods.
pub fn pod_cgroup_parent(cgroup_root: &Path, qos: QosClass, uid: &str) -> PathBuf {
    qos_cgroup(cgroup_root, qos).join(format!("pod{uid}"))
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
}
