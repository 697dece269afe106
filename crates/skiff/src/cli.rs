//! Command-line flags. Names and defaults follow the upstream components
//! (`kubelet --pod-manifest-path`, `--container-runtime-endpoint`, ...).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use skiff_kubelet::AuthorizationMode;
use skiff_kubelet::config::kubelet_configuration;

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
    /// The Kubernetes API server (SQLite or etcd store, HTTPS on --secure-port).
    Apiserver(ApiserverArgs),
    /// The scheduler: binds pending pods to nodes (kube-scheduler's flags and
    /// KubeSchedulerConfiguration).
    Scheduler(SchedulerArgs),
    /// The controller manager: the controllers that turn workloads into pods
    /// (kube-controller-manager's flags).
    ControllerManager(Box<ControllerManagerArgs>),
    /// A single-node cluster in one process: the API server, scheduler, controller
    /// manager and a kubelet with its embedded runtime. Takes the API server's and the
    /// kubelet's flags.
    Server(Box<ServerArgs>),
    /// Image store tools (`skiff image import FILE|DIR`).
    Image(crate::image::ImageArgs),
    /// Benchmarks.
    #[command(subcommand)]
    Bench(BenchCommand),
}

impl Command {
    /// Whether the command runs until it is stopped (a component), rather than doing one
    /// job and exiting.
    pub fn is_daemon(&self) -> bool {
        !matches!(self, Command::Image(_) | Command::Bench(_))
    }
}

/// `skiff bench` subcommands.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Drives any CRI endpoint (Skiff, containerd, CRI-O): pod lifecycle latencies and the
    /// memory of the runtime and its per-pod processes.
    Cri(BenchCriArgs),
    /// A node simulator for scale: fake Nodes and pending pods in a running cluster, until
    /// a scheduler has bound them all (scheduled pods/s, creation-to-binding latency).
    Scheduler(BenchSchedulerArgs),
    /// The node simulator as kubelets too: a Deployment on fake Nodes whose pods are
    /// marked Running and Ready (pods created, bound and available over time).
    Controllers(BenchControllersArgs),
}

/// `skiff bench controllers` flags.
#[derive(Debug, Args)]
pub struct BenchControllersArgs {
    /// The kubeconfig of the cluster (its admin credentials: nodes are created).
    #[arg(long)]
    pub kubeconfig: PathBuf,
    /// Fake nodes to create (32 CPUs, 128 GiB, 110 pods each).
    #[arg(long, default_value_t = 100)]
    pub nodes: usize,
    /// Replicas of the Deployment.
    #[arg(long, default_value_t = 1000)]
    pub replicas: usize,
    /// How long to wait for the Deployment to be available.
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
    /// The controller manager's PID, to report its RSS before and after.
    #[arg(long)]
    pub controller_manager_pid: Option<u32>,
    /// What the RSS lines call the process of --controller-manager-pid (`skiff server`
    /// when the controller manager runs inside it).
    #[arg(long, default_value = "controller manager")]
    pub process_label: String,
}

/// `skiff bench scheduler` flags.
#[derive(Debug, Args)]
pub struct BenchSchedulerArgs {
    /// The kubeconfig of the cluster (its admin credentials: nodes are created).
    #[arg(long)]
    pub kubeconfig: PathBuf,
    /// Fake nodes to create (32 CPUs, 128 GiB, 110 pods; 10 zones; every tenth tainted).
    #[arg(long, default_value_t = 1000)]
    pub nodes: usize,
    /// Pods to create (80 % 100m/128Mi, 15 % 1 CPU/1 GiB, 5 % tolerating the taint).
    #[arg(long, default_value_t = 10000)]
    pub pods: usize,
    /// `plain`, or `spread`: pods with a zone topology spread constraint and a preferred
    /// pod anti-affinity per hostname.
    #[arg(long, default_value = "plain", value_parser = ["plain", "spread"])]
    pub shape: String,
    /// Requests in flight while creating nodes and pods.
    #[arg(long, default_value_t = 32)]
    pub concurrency: usize,
    /// How long to wait for every pod to be bound.
    #[arg(long, default_value = "10m", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
    /// A pause after the nodes are created (for the scheduler to see them all).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub settle: Option<Duration>,
    /// The scheduler's PID, to report its RSS at the end.
    #[arg(long)]
    pub scheduler_pid: Option<u32>,
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

/// `skiff kubelet` flags. With `--config`, the file gives the settings; a flag overrides
/// it only when given, and what neither sets keeps the upstream default (shown in
/// brackets).
#[derive(Debug, Args)]
pub struct KubeletArgs {
    /// KubeletConfiguration file (kubelet.config.k8s.io/v1beta1, YAML or JSON).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Directory of static pod manifests (one Pod per .yaml, .yml or .json file).
    #[arg(long)]
    pub pod_manifest_path: Option<PathBuf>,
    /// URL serving a Pod or a PodList (YAML or JSON) to run as static pods.
    #[arg(long, value_name = "URL")]
    pub manifest_url: Option<String>,
    /// HTTP headers for --manifest-url requests, `name:value` pairs separated by commas;
    /// may be repeated (`a:hello,b:again --manifest-url-header b:beautiful`).
    #[arg(long, value_name = "NAME:VALUE,...")]
    pub manifest_url_header: Vec<String>,
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
    /// Address the kubelet's ports listen on [default: 127.0.0.1].
    #[arg(long, value_name = "IP")]
    pub address: Option<IpAddr>,
    /// Main HTTPS port (logs, exec, attach, port-forward, stats; authenticated and
    /// authorized as `--client-ca-file`, `--anonymous-auth`, `--authentication-token-webhook`
    /// and `--authorization-mode` say); 0 disables it [default: 10250].
    #[arg(long, value_name = "PORT")]
    pub port: Option<u16>,
    /// Read-only HTTP port (`/healthz`, `/pods`, `/stats/summary`, `/metrics`); 0 disables
    /// it [default: 10255; 0 with --config, as upstream's KubeletConfiguration].
    #[arg(long, value_name = "PORT")]
    pub read_only_port: Option<u16>,
    /// Serving certificate of the main port [default: self-signed].
    #[arg(long, value_name = "FILE")]
    pub tls_cert_file: Option<PathBuf>,
    /// Private key of --tls-cert-file.
    #[arg(long, value_name = "FILE")]
    pub tls_private_key_file: Option<PathBuf>,
    /// Node name to use instead of the host name.
    #[arg(long)]
    pub hostname_override: Option<String>,
    /// The node's IP address (status.hostIP); default: the address of the default route.
    #[arg(long)]
    pub node_ip: Option<IpAddr>,
    /// A remote CRI runtime (`unix:///run/containerd/containerd.sock`) instead of the
    /// embedded one [default: the file's containerRuntimeEndpoint, else embedded].
    #[arg(long)]
    pub container_runtime_endpoint: Option<String>,
    /// How often the manifest directory is rescanned, besides change notifications
    /// [default: 20s].
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub file_check_frequency: Option<Duration>,
    /// How often --manifest-url is fetched [default: 20s].
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub http_check_frequency: Option<Duration>,
    /// How often every pod is synced even without events [default: 1m].
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub sync_frequency: Option<Duration>,
    /// Root of the cgroup hierarchy for pods (`<root>/kubepods/...`) [default: /].
    #[arg(long, value_name = "PATH")]
    pub cgroup_root: Option<PathBuf>,
    /// cgroup driver; only `cgroupfs` is supported [default: cgroupfs].
    #[arg(long, value_name = "DRIVER")]
    pub cgroup_driver: Option<String>,
    /// QoS cgroups `kubepods/{burstable,besteffort}` [default: true].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub cgroups_per_qos: Option<bool>,
    /// Resources reserved for system daemons, e.g. `cpu=200m,memory=500Mi`.
    #[arg(long, value_name = "RESOURCE=QUANTITY,...", value_parser = map_string_string)]
    pub system_reserved: Option<BTreeMap<String, String>>,
    /// Resources reserved for Kubernetes daemons, e.g. `memory=256Mi`.
    #[arg(long, value_name = "RESOURCE=QUANTITY,...", value_parser = map_string_string)]
    pub kube_reserved: Option<BTreeMap<String, String>>,
    /// Hard eviction thresholds, replacing the defaults, e.g.
    /// `memory.available<100Mi,nodefs.available<10%`.
    #[arg(long, value_name = "SIGNAL<QUANTITY,...", value_parser = eviction_thresholds)]
    pub eviction_hard: Option<BTreeMap<String, String>>,
    /// Disk usage percentage above which image GC runs [default: 85].
    #[arg(long, value_name = "PERCENT")]
    pub image_gc_high_threshold: Option<i32>,
    /// Disk usage percentage image GC frees down to [default: 80].
    #[arg(long, value_name = "PERCENT")]
    pub image_gc_low_threshold: Option<i32>,
    /// Minimum age of a dead container before it is garbage collected [default: 0s].
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub minimum_container_ttl_duration: Option<Duration>,
    /// Dead containers kept per container [default: 1].
    #[arg(long, value_name = "N")]
    pub maximum_dead_containers_per_container: Option<i32>,
    /// Dead containers kept on the node; -1 for no limit [default: -1].
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub maximum_dead_containers: Option<i32>,
    /// A container log larger than this is rotated, e.g. `10Mi` [default: 10Mi].
    #[arg(long, value_name = "QUANTITY", value_parser = log_max_size)]
    pub container_log_max_size: Option<u64>,
    /// Log files kept per container, the live one included, at least 2 [default: 5].
    #[arg(long, value_name = "N")]
    pub container_log_max_files: Option<usize>,
    /// Maximum number of processes per pod; -1: the node's pid capacity [default: -1].
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub pod_max_pids: Option<i64>,

    // --- In a cluster (upstream kubelet's names and semantics) ---
    /// Path to a kubeconfig file, specifying how to connect to the API server. Providing
    /// --kubeconfig enables API server mode, omitting --kubeconfig enables standalone mode.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Register the node with the API server; irrelevant without --kubeconfig
    /// [default: true].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub register_node: Option<bool>,
    /// Register the node with the given list of taints (comma separated
    /// `<key>=<value>:<effect>`). No-op if --register-node is false.
    #[arg(long, value_name = "TAINTS", value_parser = register_with_taints)]
    pub register_with_taints: Option<kubelet_configuration::RegisterWithTaints>,
    /// Labels to add when registering the node in the cluster, `key=value` pairs separated
    /// by ','; may be repeated. Labels in the 'kubernetes.io' namespace must begin with an
    /// allowed prefix (kubelet.kubernetes.io, node.kubernetes.io) or be one of the
    /// kubelet's own labels (kubernetes.io/hostname, topology.kubernetes.io/zone, ...).
    #[arg(long, value_name = "KEY=VALUE,...")]
    pub node_labels: Vec<String>,
    /// How often the kubelet computes the node status and posts it when it changed
    /// [default: 10s].
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub node_status_update_frequency: Option<Duration>,
    /// QPS to use while talking with the API server; must be >= 0 [default: 50].
    #[arg(long, value_name = "QPS", allow_negative_numbers = true)]
    pub kube_api_qps: Option<i32>,
    /// Burst to use while talking with the API server; must be >= 0 [default: 100].
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub kube_api_burst: Option<i32>,
    /// Number of pods that can run on this kubelet [default: 110].
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub max_pods: Option<i32>,
    /// Comma-separated list of DNS server IP addresses for pods with
    /// `dnsPolicy=ClusterFirst`; may be repeated. Entries that are not IP addresses are
    /// logged and skipped, as upstream.
    #[arg(long, value_name = "IP,...", value_delimiter = ',')]
    pub cluster_dns: Option<Vec<String>>,
    /// Domain for this cluster; pods search it in addition to the host's search domains.
    #[arg(long, value_name = "DOMAIN")]
    pub cluster_domain: Option<String>,
    /// Requests to the main port presenting a client certificate signed by one of these
    /// authorities are authenticated as the certificate's CommonName.
    #[arg(long, value_name = "FILE")]
    pub client_ca_file: Option<PathBuf>,
    /// Anonymous requests to the main port (not rejected by another authentication method)
    /// are `system:anonymous` [default: true; false with --config, as upstream's
    /// KubeletConfiguration].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub anonymous_auth: Option<bool>,
    /// Use the TokenReview API to authenticate bearer tokens [default: false; true with
    /// --config].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub authentication_token_webhook: Option<bool>,
    /// Authorization mode of the main port: AlwaysAllow or Webhook (SubjectAccessReview)
    /// [default: AlwaysAllow; Webhook with --config].
    #[arg(long, value_name = "MODE", value_parser = authorization_mode)]
    pub authorization_mode: Option<AuthorizationMode>,
    /// Unique identifier of the node in a machine database (the Node's spec.providerID).
    #[arg(long, value_name = "ID")]
    pub provider_id: Option<String>,
    #[command(flatten)]
    pub network: NetworkArgs,
}

fn register_with_taints(s: &str) -> anyhow::Result<kubelet_configuration::RegisterWithTaints> {
    kubelet_configuration::parse_register_with_taints(s)
}

fn authorization_mode(s: &str) -> anyhow::Result<AuthorizationMode> {
    kubelet_configuration::parse_authorization_mode(s)
}

fn duration(s: &str) -> Result<Duration, skiff_kubelet::error::Error> {
    kubelet_configuration::parse_duration(s)
}

fn log_max_size(s: &str) -> Result<u64, skiff_kubelet::error::Error> {
    kubelet_configuration::parse_log_max_size(s)
}

fn map_string_string(s: &str) -> Result<BTreeMap<String, String>, skiff_kubelet::error::Error> {
    kubelet_configuration::parse_map_string_string(s)
}

fn eviction_thresholds(s: &str) -> Result<BTreeMap<String, String>, skiff_kubelet::error::Error> {
    kubelet_configuration::parse_eviction_thresholds(s)
}

/// `skiff scheduler` flags (upstream kube-scheduler's names and defaults). A flag that is
/// set wins over the `--config` file's field.
#[derive(Debug, Args)]
pub struct SchedulerArgs {
    /// KubeSchedulerConfiguration file (kubescheduler.config.k8s.io/v1, YAML or JSON).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// kubeconfig of the API server (else `clientConnection.kubeconfig` of --config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Address of the HTTPS endpoint (/healthz, /livez, /readyz, /metrics).
    #[arg(long, default_value = "0.0.0.0")]
    pub bind_address: IpAddr,
    /// Port of the HTTPS endpoint; 0 disables it.
    #[arg(long, default_value_t = 10259)]
    pub secure_port: u16,
    /// Run under leader election on a Lease (default: true, or leaderElection.leaderElect).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub leader_elect: Option<bool>,
    /// How long non-leaders wait before taking an unrenewed lease [default: 15s].
    #[arg(long, value_parser = humantime::parse_duration)]
    pub leader_elect_lease_duration: Option<Duration>,
    /// How long the leader retries renewing before it gives up [default: 10s].
    #[arg(long, value_parser = humantime::parse_duration)]
    pub leader_elect_renew_deadline: Option<Duration>,
    /// The wait between leader election attempts [default: 2s].
    #[arg(long, value_parser = humantime::parse_duration)]
    pub leader_elect_retry_period: Option<Duration>,
    /// The Lease's name [default: kube-scheduler].
    #[arg(long)]
    pub leader_elect_resource_name: Option<String>,
    /// The Lease's namespace [default: kube-system].
    #[arg(long)]
    pub leader_elect_resource_namespace: Option<String>,
    /// Requests per second to the API server [default: 50].
    #[arg(long)]
    pub kube_api_qps: Option<f32>,
    /// Burst of requests to the API server [default: 100].
    #[arg(long)]
    pub kube_api_burst: Option<i32>,
    /// How long a pod may stay unschedulable before it is tried again [default: 5m].
    #[arg(long, value_parser = humantime::parse_duration)]
    pub pod_max_in_unschedulable_pods_duration: Option<Duration>,
}

/// `skiff server` flags: the API server's and the kubelet's under their own names, and
/// the ports of the scheduler's and the controller manager's endpoints.
#[derive(Debug, Args)]
pub struct ServerArgs {
    #[command(flatten)]
    pub apiserver: ApiserverArgs,
    #[command(flatten)]
    pub kubelet: Box<KubeletArgs>,
    /// HTTPS port of the scheduler's /healthz and /metrics; 0 disables it.
    #[arg(long, value_name = "PORT", default_value_t = 10259)]
    pub scheduler_secure_port: u16,
    /// HTTPS port of the controller manager's /healthz and /metrics; 0 disables it.
    #[arg(long, value_name = "PORT", default_value_t = 10257)]
    pub controller_manager_secure_port: u16,
    /// How long a Node may stay silent before the controller manager marks it Unknown
    /// and taints it unreachable (the controller manager's flag).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "50s")]
    pub node_monitor_grace_period: Duration,
    /// The controller manager's requests per second to the API server (its
    /// `--kube-api-qps`; upstream's default 20 creates about 20 pods a second).
    #[arg(long, value_name = "QPS", default_value_t = 20.0)]
    pub controller_manager_kube_api_qps: f32,
    /// The controller manager's burst of requests (its `--kube-api-burst`).
    #[arg(long, value_name = "N", default_value_t = 30)]
    pub controller_manager_kube_api_burst: i32,
    /// The scheduler's requests per second to the API server [default: the
    /// configuration's, 50].
    #[arg(long, value_name = "QPS")]
    pub scheduler_kube_api_qps: Option<f32>,
    /// The scheduler's burst of requests [default: the configuration's, 100].
    #[arg(long, value_name = "N")]
    pub scheduler_kube_api_burst: Option<i32>,
    /// Whether the scheduler, controller manager and kubelet call the API server in
    /// process (no TLS, TCP or HTTP framing; each still as its own certificate's user)
    /// rather than over HTTPS.
    #[arg(long, default_value = "true", num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub in_process_api: bool,
}

/// `skiff apiserver` flags (upstream kube-apiserver's names and defaults).
#[derive(Debug, Args)]
pub struct ApiserverArgs {
    /// State directory: the SQLite store, `pki/` and `admin.kubeconfig`.
    #[arg(long, value_name = "DIR", default_value = "/var/lib/skiff/server")]
    pub data_dir: PathBuf,
    /// HTTPS port.
    #[arg(long, value_name = "PORT", default_value_t = 6443)]
    pub secure_port: u16,
    /// Address the HTTPS port listens on.
    #[arg(long, value_name = "IP", default_value = "0.0.0.0")]
    pub bind_address: IpAddr,
    /// etcd v3 endpoints, comma-separated (`http://127.0.0.1:2379`); the store is SQLite
    /// in --data-dir when not given.
    #[arg(long, value_name = "URLS", value_delimiter = ',')]
    pub etcd_servers: Vec<String>,
    /// Cluster IPs of Services; the first one is the `kubernetes` service's.
    #[arg(long, value_name = "CIDR", default_value = "10.96.0.0/12")]
    pub service_cluster_ip_range: ipnet::IpNet,
    /// Port range of NodePort services, `FIRST-LAST`.
    #[arg(long, value_name = "RANGE", default_value = "30000-32767", value_parser = port_range)]
    pub service_node_port_range: std::ops::RangeInclusive<u16>,
    /// Address of the `kubernetes` service's endpoints [default: the host's first
    /// non-loopback address].
    #[arg(long, value_name = "IP")]
    pub advertise_address: Option<IpAddr>,
}

/// `30000-32767` (upstream also takes `30000+2767`).
fn port_range(s: &str) -> Result<std::ops::RangeInclusive<u16>, String> {
    let bad = || format!("invalid port range {s:?}: want FIRST-LAST");
    let (first, last) = if let Some((a, b)) = s.split_once('-') {
        let first: u16 = a.trim().parse().map_err(|_| bad())?;
        (first, b.trim().parse::<u16>().map_err(|_| bad())?)
    } else if let Some((a, b)) = s.split_once('+') {
        let first: u16 = a.trim().parse().map_err(|_| bad())?;
        let size: u16 = b.trim().parse().map_err(|_| bad())?;
        (first, first.checked_add(size).ok_or_else(bad)?)
    } else {
        return Err(bad());
    };
    if first > last {
        return Err(bad());
    }
    Ok(first..=last)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_node_port_ranges() {
        assert_eq!(port_range("30000-32767"), Ok(30000..=32767));
        assert_eq!(port_range("30000+2767"), Ok(30000..=32767));
        assert!(port_range("32767-30000").is_err());
        assert!(port_range("30000").is_err());
        assert!(port_range("a-b").is_err());
    }

    #[test]
    fn controller_manager_certificate_and_ipam_flags() {
        let cli = Cli::try_parse_from([
            "skiff",
            "controller-manager",
            "--kubeconfig=/k",
            "--cluster-signing-cert-file=/ca.crt",
            "--cluster-signing-key-file=/ca.key",
            "--allocate-node-cidrs",
            "--cluster-cidr=10.244.0.0/16,fd00:10:244::/56",
            "--node-cidr-mask-size-ipv6=64",
        ])
        .unwrap();
        let Command::ControllerManager(args) = cli.command else {
            panic!("not controller-manager");
        };
        assert_eq!(
            args.cluster_signing_cert_file,
            Some(PathBuf::from("/ca.crt"))
        );
        assert_eq!(
            args.cluster_signing_duration,
            Duration::from_secs(8760 * 3600)
        );
        assert!(args.allocate_node_cidrs);
        assert_eq!(args.cluster_cidr.len(), 2);
        assert_eq!(args.node_cidr_mask_size_ipv6, Some(64));
        let cli = Cli::try_parse_from(["skiff", "controller-manager", "--kubeconfig=/k"]).unwrap();
        let Command::ControllerManager(args) = cli.command else {
            panic!("not controller-manager");
        };
        assert!(!args.allocate_node_cidrs);
        assert!(args.cluster_cidr.is_empty());
    }

    #[test]
    fn apiserver_defaults_are_upstream() {
        let cli = Cli::try_parse_from(["skiff", "apiserver"]).unwrap();
        let Command::Apiserver(args) = cli.command else {
            panic!("not apiserver");
        };
        assert_eq!(args.secure_port, 6443);
        assert_eq!(args.data_dir, PathBuf::from("/var/lib/skiff/server"));
        assert_eq!(args.service_cluster_ip_range.to_string(), "10.96.0.0/12");
        assert!(args.etcd_servers.is_empty());
    }
}

/// `skiff controller-manager` flags (kube-controller-manager's names and defaults).
#[derive(Debug, Args)]
pub struct ControllerManagerArgs {
    /// kubeconfig of the API server.
    #[arg(long)]
    pub kubeconfig: PathBuf,
    /// Controllers to run: `*` for those on by default, `name` to enable one, `-name` to
    /// disable one (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "*")]
    pub controllers: Vec<String>,
    /// ReplicaSets synced at once.
    #[arg(long, default_value_t = 5)]
    pub concurrent_replicaset_syncs: usize,
    /// Deployments synced at once.
    #[arg(long, default_value_t = 5)]
    pub concurrent_deployment_syncs: usize,
    /// DaemonSets synced at once.
    #[arg(long, default_value_t = 2)]
    pub concurrent_daemonset_syncs: usize,
    /// StatefulSets synced at once.
    #[arg(long, default_value_t = 5)]
    pub concurrent_statefulset_syncs: usize,
    /// Garbage collector workers.
    #[arg(long, default_value_t = 20)]
    pub concurrent_gc_syncs: usize,
    /// Jobs synced at once.
    #[arg(long, default_value_t = 5)]
    pub concurrent_job_syncs: usize,
    /// Namespaces being deleted at once.
    #[arg(long, default_value_t = 10)]
    pub concurrent_namespace_syncs: usize,
    /// How often Nodes' heartbeats are checked.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "5s")]
    pub node_monitor_period: Duration,
    /// How long a Node may stay silent before it is marked Unknown and tainted
    /// unreachable.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "50s")]
    pub node_monitor_grace_period: Duration,
    /// Terminated pods kept before the oldest are deleted; 0 keeps all.
    #[arg(long, default_value_t = 12_500)]
    pub terminated_pod_gc_threshold: usize,
    /// CA bundle published as the kube-root-ca.crt ConfigMap in every namespace (default:
    /// the kubeconfig's CA).
    #[arg(long)]
    pub root_ca_file: Option<PathBuf>,
    /// CronJobs synced at once.
    #[arg(long, default_value_t = 5)]
    pub concurrent_cron_job_syncs: usize,
    /// TTL-after-finished workers (Jobs checked for expiry at once).
    #[arg(long, default_value_t = 5)]
    pub concurrent_ttl_after_finished_syncs: usize,
    /// Services the Endpoints controller syncs at once.
    #[arg(long, default_value_t = 5)]
    pub concurrent_endpoint_syncs: usize,
    /// Services the EndpointSlice controller syncs at once.
    #[arg(long, default_value_t = 5)]
    pub concurrent_service_endpoint_syncs: usize,
    /// Endpoints in one EndpointSlice (1 to 1000).
    #[arg(long, default_value_t = 100)]
    pub max_endpoints_per_slice: usize,
    /// ResourceQuotas synced at once.
    #[arg(long, default_value_t = 5)]
    pub concurrent_resource_quota_syncs: usize,
    /// How often every ResourceQuota's usage is recalculated in full.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "5m")]
    pub resource_quota_sync_period: Duration,
    /// Address of the HTTPS endpoint (/healthz, /livez, /readyz, /metrics).
    #[arg(long, default_value = "0.0.0.0")]
    pub bind_address: IpAddr,
    /// Port of the HTTPS endpoint; 0 disables it.
    #[arg(long, default_value_t = 10257)]
    pub secure_port: u16,
    /// Run under leader election on the Lease kube-system/kube-controller-manager.
    #[arg(long, default_value = "true", num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub leader_elect: bool,
    /// How long non-leaders wait before taking an unrenewed lease.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "15s")]
    pub leader_elect_lease_duration: Duration,
    /// How long the leader retries renewing before it gives up.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "10s")]
    pub leader_elect_renew_deadline: Duration,
    /// The wait between leader election attempts.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "2s")]
    pub leader_elect_retry_period: Duration,
    /// Requests per second to the API server.
    #[arg(long, default_value_t = 20.0)]
    pub kube_api_qps: f32,
    /// Burst of requests to the API server.
    #[arg(long, default_value_t = 30)]
    pub kube_api_burst: i32,
    /// CA certificate (PEM) the CSR signer issues cluster certificates with; the signer
    /// does not start without it and --cluster-signing-key-file.
    #[arg(long, value_name = "FILE")]
    pub cluster_signing_cert_file: Option<PathBuf>,
    /// The private key (PEM) of --cluster-signing-cert-file.
    #[arg(long, value_name = "FILE")]
    pub cluster_signing_key_file: Option<PathBuf>,
    /// The longest lifetime of a signed certificate (a request's
    /// spec.expirationSeconds may ask for less).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "8760h")]
    pub cluster_signing_duration: Duration,
    /// Give each Node a pod CIDR from --cluster-cidr.
    #[arg(long, default_value = "false", num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub allocate_node_cidrs: bool,
    /// The pods' CIDR range, one per IP family (comma-separated for dual-stack).
    #[arg(long, value_name = "CIDRS", value_delimiter = ',')]
    pub cluster_cidr: Vec<ipnet::IpNet>,
    /// Mask size of node CIDRs in a single-stack cluster [default: 24 for IPv4, 64 for
    /// IPv6].
    #[arg(long, value_name = "BITS")]
    pub node_cidr_mask_size: Option<u8>,
    /// Mask size of IPv4 node CIDRs [default: 24].
    #[arg(long, value_name = "BITS")]
    pub node_cidr_mask_size_ipv4: Option<u8>,
    /// Mask size of IPv6 node CIDRs [default: 64].
    #[arg(long, value_name = "BITS")]
    pub node_cidr_mask_size_ipv6: Option<u8>,
    /// The Services' CIDR ranges (comma-separated), never given to nodes.
    #[arg(long, value_name = "CIDRS", value_delimiter = ',')]
    pub service_cluster_ip_range: Vec<ipnet::IpNet>,
}
