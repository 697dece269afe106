//! Runtime configuration: where state lives, which OCI runtimes run containers, how
//! registries are reached. Loaded from one TOML file ([`RuntimeConfig::from_toml_file`]);
//! every field has a default, so an empty file is a valid configuration.

mod file;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::Duration;

/// Name of the handler used when RunPodSandbox gives an empty `runtime_handler`.
pub const DEFAULT_HANDLER: &str = "runc";

/// Configuration of the CRI runtime (the role of containerd's `[plugins."io.containerd.grpc.v1.cri"]`).
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Persistent root: `<root>/sandboxes/<id>.json`, `<root>/containers/<id>.json`, images.
    pub root: PathBuf,
    /// Volatile state (a tmpfs like `/run/skiff`): CRI socket, namespace pins, bundles,
    /// shim files, OCI runtime state.
    pub state: PathBuf,
    /// Binary started as `<shim_binary> shim ...` to monitor each container.
    pub shim_binary: PathBuf,
    /// OCI runtime handlers by name (CRI `RunPodSandboxRequest.runtime_handler`, the
    /// RuntimeClass handler). Always holds [`DEFAULT_HANDLER`].
    pub handlers: BTreeMap<String, Handler>,
    /// Directory holding CNI network configuration lists (`*.conflist`).
    pub cni_conf_dir: PathBuf,
    /// Directories searched for CNI plugin binaries (`CNI_PATH`).
    pub cni_bin_dirs: Vec<PathBuf>,
    /// Pod subnet used by the default conflist written when `cni_conf_dir` has none;
    /// replaced by CRI UpdateRuntimeConfig.
    pub pod_cidr: ipnet::IpNet,
    /// Streaming server (exec / attach / port-forward URLs returned by the CRI).
    pub stream: StreamConfig,
    /// Per-registry settings, keyed by registry host (`docker.io`, `127.0.0.1:5000`).
    pub registries: BTreeMap<String, RegistryHost>,
    /// A pull that receives no byte for this long is cancelled (containerd's
    /// `image_pull_progress_timeout`).
    pub pull_progress_timeout: Duration,
}

/// One OCI runtime handler (`[runtimes.<name>]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handler {
    /// OCI runtime binary (`runc`, `crun`), resolved through `PATH` when relative.
    pub binary: PathBuf,
}

/// Where the streaming server listens (`[stream]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamConfig {
    /// Listen address; default loopback, as containerd's `stream_server_address`.
    pub address: IpAddr,
    /// Listen port; 0 picks a free one.
    pub port: u16,
}

/// Settings for one registry host (`[registries."<host>"]`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegistryHost {
    /// Endpoints tried in order before the registry itself, as `scheme://host[:port]`.
    pub mirrors: Vec<String>,
    /// Speak plain HTTP to this host (loopback hosts always do).
    pub plain_http: bool,
    /// Credentials used when the CRI request carries no AuthConfig.
    pub auth: Option<Credentials>,
}

/// Registry credentials: a user name and password, or an identity (refresh) token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credentials {
    /// HTTP basic credentials (also exchanged for a bearer token when the registry asks).
    Basic { username: String, password: String },
    /// An OAuth2 refresh token (CRI `AuthConfig.identity_token`).
    IdentityToken(String),
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            root: PathBuf::from("/var/lib/skiff/runtime"),
            state: PathBuf::from("/run/skiff"),
            shim_binary: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("skiff")),
            handlers: default_handlers(),
            cni_conf_dir: PathBuf::from("/etc/cni/net.d"),
            cni_bin_dirs: vec![PathBuf::from("/usr/lib/cni"), PathBuf::from("/opt/cni/bin")],
            pod_cidr: ipnet::IpNet::V4(
                ipnet::Ipv4Net::new(Ipv4Addr::new(10, 88, 0, 0), 16).unwrap_or_default(),
            ),
            stream: StreamConfig {
                address: IpAddr::V4(Ipv4Addr::LOCALHOST),
                port: 0,
            },
            registries: BTreeMap::new(),
            pull_progress_timeout: Duration::from_secs(5 * 60),
        }
    }
}

/// `runc` (the default) and `crun`, each found through `PATH`.
fn default_handlers() -> BTreeMap<String, Handler> {
    ["runc", "crun"]
        .into_iter()
        .map(|name| {
            (
                name.to_string(),
                Handler {
                    binary: PathBuf::from(name),
                },
            )
        })
        .collect()
}

impl RuntimeConfig {
    /// The handler named by a RuntimeClass (`""` means [`DEFAULT_HANDLER`]); `None` when
    /// no such handler is configured.
    pub fn handler(&self, name: &str) -> Option<&Handler> {
        let name = if name.is_empty() {
            DEFAULT_HANDLER
        } else {
            name
        };
        self.handlers.get(name)
    }
}
