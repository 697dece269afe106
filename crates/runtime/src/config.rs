//! Runtime configuration: where state lives and which external binaries run containers.

use std::path::PathBuf;

/// Configuration of the CRI runtime (the role of containerd's `[plugins."io.containerd.grpc.v1.cri"]`).
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Persistent root: `<root>/sandboxes/<id>.json`, `<root>/containers/<id>.json`, images.
    pub root: PathBuf,
    /// Volatile state (a tmpfs like `/run/skiff`): namespace pins, bundles, shim files, runc root.
    pub state: PathBuf,
    /// OCI runtime binary (`runc` or `crun`), resolved through `PATH` when relative.
    pub runc: PathBuf,
    /// Binary started as `<shim_binary> shim ...` to monitor each container.
    pub shim_binary: PathBuf,
    /// Directory holding CNI network configuration lists (`*.conflist`).
    pub cni_conf_dir: PathBuf,
    /// Directories searched for CNI plugin binaries (`CNI_PATH`).
    pub cni_bin_dirs: Vec<PathBuf>,
    /// Pod subnet used by the default conflist written when `cni_conf_dir` has none.
    pub pod_cidr: ipnet::IpNet,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            root: PathBuf::from("/var/lib/skiff/runtime"),
            state: PathBuf::from("/run/skiff"),
            runc: PathBuf::from("runc"),
            shim_binary: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("skiff")),
            cni_conf_dir: PathBuf::from("/etc/cni/net.d"),
            cni_bin_dirs: vec![PathBuf::from("/usr/lib/cni"), PathBuf::from("/opt/cni/bin")],
            pod_cidr: ipnet::IpNet::V4(
                ipnet::Ipv4Net::new(std::net::Ipv4Addr::new(10, 88, 0, 0), 16).unwrap_or_default(),
            ),
        }
    }
}
