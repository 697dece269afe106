//! Command-line flags. Names and defaults follow the upstream components
//! (`kubelet --pod-manifest-path`, `--container-runtime-endpoint`, ...).

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

/// Kubernetes in one binary.
#[derive(Debug, Parser)]
#[command(name = "skiff", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// The node agent. Embeds the CRI runtime unless --container-runtime-endpoint is given.
    Kubelet(Box<KubeletArgs>),
    /// The CRI runtime alone, serving CRI v1 on `<state>/skiff.sock`.
    Runtime(RuntimeArgs),
    /// Image store tools (`skiff image import FILE|DIR`).
    Image(crate::image::ImageArgs),
    /// Benchmarks.
    #[command(subcommand)]
    Bench(BenchCommand),
}

/// `skiff bench` subcommands.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Drives any CRI endpoint (Skiff, containerd, CRI-O): pod lifecycle latencies and the
    /// memory of the runtime and its per-pod processes.
    Cri(BenchCriArgs),
}

/// `skiff bench cri` flags.
#[derive(Debug, Args)]
pub struct BenchCriArgs {
    /// The CRI endpoint, `unix:///run/skiff/skiff.sock`.
    #[arg(long)]
    pub endpoint: String,
    /// The image every benchmark container runs (it must have `sleep`).
    #[arg(long)]
    pub image: Option<String>,
    /// Iterations of the timed pod lifecycle.
    #[arg(long, default_value_t = 10)]
    pub count: usize,
    /// Numbers of running pods at which memory is measured.
    #[arg(long, value_delimiter = ',', default_value = "0,10,50")]
    pub pods: Vec<usize>,
}

/// `skiff kubelet` flags.
#[derive(Debug, Args)]
pub struct KubeletArgs {
    /// Directory of static pod manifests (one Pod per .yaml, .yml or .json file).
    #[arg(long)]
    pub pod_manifest_path: Option<PathBuf>,
    /// The kubelet's own state directory.
    #[arg(long, default_value = "/var/lib/skiff/kubelet")]
    pub root_dir: PathBuf,
    /// TOML configuration file of the embedded runtime (the format of `skiff runtime
    /// --config`); the `--runtime-*` and CNI flags override it when given.
    #[arg(long, value_name = "FILE")]
    pub runtime_config: Option<PathBuf>,
    /// Persistent state of the embedded runtime (images, snapshots, sandboxes, containers)
    /// [default: /var/lib/skiff/runtime].
    #[arg(long, value_name = "DIR")]
    pub runtime_root: Option<PathBuf>,
    /// Volatile state of the embedded runtime (CRI socket, bundles, namespace pins)
    /// [default: /run/skiff].
    #[arg(long, value_name = "DIR")]
    pub runtime_state: Option<PathBuf>,
    /// Read-only HTTP port (`/healthz`, `/pods`, `/stats/summary`, `/metrics`); 0 disables it.
    #[arg(long, default_value_t = 10255)]
    pub read_only_port: u16,
    /// The kubelet's HTTPS port (logs, exec, attach, port-forward, stats); 0 disables it.
    #[arg(long, default_value_t = 10250)]
    pub port: u16,
    /// Address of the kubelet ports. Loopback by default: the HTTPS port has no
    /// authentication or authorization until the API server provides them.
    #[arg(long, default_value = "127.0.0.1")]
    pub address: IpAddr,
    /// Serving certificate (PEM) of the HTTPS port; self-signed into
    /// `<root-dir>/pki/kubelet.crt` when not given.
    #[arg(long, value_name = "FILE", requires = "tls_private_key_file")]
    pub tls_cert_file: Option<PathBuf>,
    /// Private key (PEM) of `--tls-cert-file`.
    #[arg(long, value_name = "FILE", requires = "tls_cert_file")]
    pub tls_private_key_file: Option<PathBuf>,
    /// Node name to use instead of the host name.
    #[arg(long)]
    pub hostname_override: Option<String>,
    /// The node's IP address (status.hostIP); default: the address of the default route.
    #[arg(long)]
    pub node_ip: Option<IpAddr>,
    /// A remote CRI runtime (`unix:///run/containerd/containerd.sock`) instead of the embedded one.
    #[arg(long)]
    pub container_runtime_endpoint: Option<String>,
    /// How often the manifest directory is rescanned, besides change notifications.
    #[arg(long, default_value = "20s", value_parser = humantime::parse_duration)]
    pub file_check_frequency: Duration,
    /// How often every pod is synced even without events.
    #[arg(long, default_value = "1m", value_parser = humantime::parse_duration)]
    pub sync_frequency: Duration,
    /// Root of the cgroup hierarchy for pods (`<root>/kubepods/...`).
    #[arg(long, default_value = "/")]
    pub cgroup_root: PathBuf,
    #[command(flatten)]
    pub network: NetworkArgs,
}

/// `skiff runtime` flags. The configuration file gives everything; a flag overrides it
/// only when given, and what neither sets keeps the built-in default.
#[derive(Debug, Args)]
pub struct RuntimeArgs {
    /// TOML configuration file (root, state, runtimes, cni, stream, registries,
    /// pull_progress_timeout).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Persistent state (images, snapshots, sandboxes, containers)
    /// [default: /var/lib/skiff/runtime].
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Volatile state (CRI socket, bundles, namespace pins) [default: /run/skiff].
    #[arg(long, value_name = "DIR")]
    pub state: Option<PathBuf>,
    #[command(flatten)]
    pub network: NetworkArgs,
}

/// CNI flags shared by the kubelet (embedded runtime) and the runtime; each overrides the
/// configuration file's `[cni]` value when given.
#[derive(Debug, Args)]
pub struct NetworkArgs {
    /// CNI network configuration directory; a default bridge conflist is written when
    /// empty [default: /etc/cni/net.d].
    #[arg(long, value_name = "DIR")]
    pub cni_conf_dir: Option<PathBuf>,
    /// CNI plugin directories, colon-separated [default: /usr/lib/cni:/opt/cni/bin].
    #[arg(long, value_name = "DIRS", value_delimiter = ':')]
    pub cni_bin_dir: Option<Vec<PathBuf>>,
    /// Pod CIDR for the default CNI configuration [default: 10.88.0.0/16].
    #[arg(long, value_name = "CIDR")]
    pub pod_cidr: Option<ipnet::IpNet>,
}
