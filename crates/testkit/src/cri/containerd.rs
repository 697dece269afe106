//! The containerd flavor: Debian's containerd 1.6 with only what its CRI plugin needs.
//! Shared by [`CriRuntime`](super::CriRuntime) and the containerd-backed
//! [`Node`](crate::Node).

use std::path::{Path, PathBuf};
use std::process::Command;

const CONTAINERD: &str = "/usr/bin/containerd";
const RUNC: &str = "/usr/sbin/runc";

/// Plugins the CRI plugin does not use; disabled so containerd starts fast and touches
/// nothing outside the runtime's directory (`opt` would populate `/opt/containerd`).
const DISABLED_PLUGINS: &[&str] = &[
    "io.containerd.internal.v1.opt",
    "io.containerd.snapshotter.v1.aufs",
    "io.containerd.snapshotter.v1.btrfs",
    "io.containerd.snapshotter.v1.devmapper",
    "io.containerd.snapshotter.v1.native",
    "io.containerd.snapshotter.v1.zfs",
    "io.containerd.tracing.processor.v1.otlp",
    "io.containerd.internal.v1.tracing",
];

/// The CRI socket of a containerd in `dir`.
pub(crate) fn socket(dir: &Path) -> PathBuf {
    dir.join("containerd.sock")
}

/// Writes `dir/containerd.toml` and `dir/certs.d` (plain HTTP to the registry `registry`,
/// `IP:PORT`) and returns the command that runs containerd on them.
///
/// The config: root `dir/rt`, state `dir/st` (network namespaces pinned there too),
/// runc v2 shim with cgroupfs and runc's state in `dir/st/runc`, CNI from `dir/cni` and
/// `/usr/lib/cni`, `pause` (the pause stand-in's reference) as `sandbox_image`, and `restrict_oom_score_adj`
/// (the test machine lacks CAP_SYS_RESOURCE, so containerd must not try to lower a
/// container's oom_score_adj below its own).
pub(crate) fn command(dir: &Path, registry: &str, pause: &str) -> anyhow::Result<Command> {
    let host_dir = dir.join("certs.d").join(registry);
    std::fs::create_dir_all(&host_dir)?;
    std::fs::write(host_dir.join("hosts.toml"), hosts_toml(registry))?;
    let config = dir.join("containerd.toml");
    std::fs::write(&config, config_toml(dir, pause))?;
    let mut cmd = Command::new(CONTAINERD);
    cmd.arg("--config").arg(config);
    Ok(cmd)
}

fn hosts_toml(host: &str) -> String {
    format!(
        "server = \"http://{host}\"\n\n[host.\"http://{host}\"]\n  capabilities = [\"pull\", \"resolve\"]\n"
    )
}

fn config_toml(dir: &Path, pause: &str) -> String {
    let d = |sub: &str| super::toml_string(&dir.join(sub));
    let disabled: Vec<String> = DISABLED_PLUGINS.iter().map(|p| format!("{p:?}")).collect();
    format!(
        r#"version = 2
root = {root}
state = {state}
disabled_plugins = [{disabled}]
required_plugins = ["io.containerd.grpc.v1.cri"]

[grpc]
  address = {socket}

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause}"
  restrict_oom_score_adj = true
  disable_apparmor = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "{RUNC}"
        Root = {runc_root}
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{cni_bin}"
    conf_dir = {cni}
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = {certs}
"#,
        root = d("rt"),
        state = d("st"),
        disabled = disabled.join(", "),
        socket = super::toml_string(&socket(dir)),
        runc_root = d("st/runc"),
        cni_bin = super::CNI_BIN_DIR,
        cni = d("cni"),
        certs = d("certs.d"),
    )
}
