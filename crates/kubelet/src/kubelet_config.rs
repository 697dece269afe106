//! The kubelet's settings (upstream `KubeletConfiguration`, kubelet.config.k8s.io/v1beta1,
//! and the flags that are not in it): [`KubeletConfig`], filled by
//! [`crate::config::kubelet_configuration`] from a file and by `skiff kubelet`'s flags.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::Taint;

use crate::logs;

/// How requests to the kubelet's main port are authorized (`authorization.mode`,
/// `--authorization-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthorizationMode {
    /// Every authenticated request is allowed (the flag default without `--config`).
    AlwaysAllow,
    /// A SubjectAccessReview is asked of the API server (the v1beta1 default).
    Webhook,
}

/// Kubelet settings: what the flags and `KubeletConfiguration` (kubelet.config.k8s.io/v1beta1)
/// resolve to. [`Default`] gives upstream's defaults; durations are wall-clock periods and
/// resource amounts are Kubernetes quantity strings keyed by resource name.
#[derive(Debug, Clone)]
pub struct KubeletConfig {
    /// Node name; static pods are named `<name>-<node_name>`.
    pub node_name: String,
    /// Node IP for `status.hostIP`; detected from the default route when `None`.
    pub node_ip: Option<IpAddr>,
    /// Directory of static pod manifests (`staticPodPath`, `--pod-manifest-path`); `None`
    /// disables the file source.
    pub pod_manifest_path: Option<PathBuf>,
    /// URL of a pod manifest list (`staticPodURL`, `--manifest-url`); `None` disables the
    /// http source.
    pub manifest_url: Option<String>,
    /// Headers sent with each manifest URL request (`staticPodURLHeader`).
    pub manifest_url_header: BTreeMap<String, Vec<String>>,
    /// Kubelet state directory (`--root-dir`), created on start; pod directories live in
    /// `<root_dir>/pods/<uid>` (see [`pod_dirs`]).
    pub root_dir: PathBuf,
    /// Root of pod log directories (`/var/log/pods`).
    pub pod_logs_dir: PathBuf,
    /// Address of the main and read-only ports (`address`); loopback until the API
    /// server brings authentication.
    pub address: IpAddr,
    /// Main HTTPS port (`port`, 10250); 0 disables it.
    pub port: u16,
    /// Read-only HTTP port (`readOnlyPort`); 0 disables it.
    pub read_only_port: u16,
    /// Serving certificate and key of the main port (`tlsCertFile`, `tlsPrivateKeyFile`);
    /// self-signed into `<root_dir>/pki` when `None`.
    pub tls_cert_file: Option<PathBuf>,
    /// See `tls_cert_file`.
    pub tls_private_key_file: Option<PathBuf>,
    /// Manifest directory rescan period (`fileCheckFrequency`, 20 s).
    pub file_check_frequency: Duration,
    /// Manifest URL poll period (`httpCheckFrequency`, 20 s).
    pub http_check_frequency: Duration,
    /// Resync period of each pod (`syncFrequency`, 1 min).
    pub sync_frequency: Duration,
    /// cgroup root under which `kubepods` is placed (`cgroupRoot`, `/`).
    pub cgroup_root: PathBuf,
    /// cgroup driver (`cgroupDriver`): only `cgroupfs` is supported.
    pub cgroup_driver: String,
    /// QoS-level cgroups `kubepods/{burstable,besteffort}` (`cgroupsPerQOS`, true).
    pub cgroups_per_qos: bool,
    /// Resources reserved for system daemons (`systemReserved`), e.g. `memory: 1Gi`.
    pub system_reserved: BTreeMap<String, String>,
    /// Resources reserved for Kubernetes daemons (`kubeReserved`).
    pub kube_reserved: BTreeMap<String, String>,
    /// Which allocatable limits are enforced on cgroups (`enforceNodeAllocatable`,
    /// `["pods"]`).
    pub enforce_node_allocatable: Vec<String>,
    /// Hard eviction thresholds (`evictionHard`), signal to quantity or percentage, e.g.
    /// `memory.available: 100Mi`, `nodefs.available: 10%`. Upstream defaults:
    /// memory.available 100Mi, nodefs.available 10%, imagefs.available 15%,
    /// nodefs.inodesFree 5%.
    pub eviction_hard: BTreeMap<String, String>,
    /// How long a node condition holds after its pressure ends
    /// (`evictionPressureTransitionPeriod`, 5 min).
    pub eviction_pressure_transition_period: Duration,
    /// Eviction manager period (upstream `evictionMonitoringPeriod`, 10 s).
    pub eviction_monitoring_period: Duration,
    /// Image GC starts above this disk usage (`imageGCHighThresholdPercent`, 85).
    pub image_gc_high_threshold_percent: i32,
    /// Image GC frees down to this disk usage (`imageGCLowThresholdPercent`, 80).
    pub image_gc_low_threshold_percent: i32,
    /// Unused images younger than this are kept (`imageMinimumGCAge`, 2 min).
    pub image_minimum_gc_age: Duration,
    /// Dead containers younger than this are kept (`--minimum-container-ttl-duration`, 0).
    pub minimum_container_ttl: Duration,
    /// Dead containers kept per (pod, container name) (`--maximum-dead-containers-per-container`, 1).
    pub max_per_pod_container: i32,
    /// Dead containers kept on the node, -1 for no limit (`--maximum-dead-containers`, -1).
    pub max_containers: i32,
    /// Pull one image at a time (`serializeImagePulls`, true).
    pub serialize_image_pulls: bool,
    /// Maximum number of processes per pod cgroup (`podPidsLimit`, -1: unlimited).
    pub pod_pids_limit: i64,
    /// Container log rotation (`containerLogMaxSize` 10Mi, `containerLogMaxFiles` 5,
    /// `containerLogMaxWorkers` 1, `containerLogMonitorInterval` 10s).
    pub container_log: logs::LogRotatePolicy,

    // --- In a cluster (upstream flags and KubeletConfiguration fields) ---
    /// The kubeconfig to reach the API server (`--kubeconfig`); `None`: standalone, only
    /// static pods.
    pub kubeconfig: Option<PathBuf>,
    /// How the `kubeconfig`'s API server is reached: over the network (the default), or
    /// in process when the kubelet runs inside `skiff server`.
    pub api_connector: skiff_client::in_process::Connector,
    /// Register the Node object (`registerNode`, `--register-node`, true).
    pub register_node: bool,
    /// Taints the Node is registered with (`registerWithTaints`, `--register-with-taints`).
    pub register_with_taints: Vec<Taint>,
    /// Labels the Node is registered with (`nodeLabels`, `--node-labels`).
    pub node_labels: BTreeMap<String, String>,
    /// How often the node status is computed and, when it changed, posted
    /// (`nodeStatusUpdateFrequency`, 10 s).
    pub node_status_update_frequency: Duration,
    /// How often the node status is posted even when unchanged
    /// (`nodeStatusReportFrequency`, 5 min).
    pub node_status_report_frequency: Duration,
    /// The node Lease's duration (`nodeLeaseDurationSeconds`, 40); it is renewed every
    /// quarter of it (10 s), as upstream.
    pub node_lease_duration_seconds: i32,
    /// Sustained requests per second to the API server (`kubeAPIQPS`, `--kube-api-qps`,
    /// 50).
    pub kube_api_qps: i32,
    /// Burst of requests to the API server (`kubeAPIBurst`, `--kube-api-burst`, 100).
    pub kube_api_burst: i32,
    /// Pods the node runs at most (`maxPods`, `--max-pods`, 110).
    pub max_pods: i32,
    /// DNS servers of pods with `ClusterFirst` DNS (`clusterDNS`, `--cluster-dns`).
    pub cluster_dns: Vec<IpAddr>,
    /// The cluster's DNS domain, searched by pods (`clusterDomain`, `--cluster-domain`).
    pub cluster_domain: String,
    /// CA bundle that client certificates of the main port are checked against
    /// (`authentication.x509.clientCAFile`, `--client-ca-file`).
    pub client_ca_file: Option<PathBuf>,
    /// Anonymous requests to the main port are `system:anonymous`
    /// (`authentication.anonymous.enabled`, `--anonymous-auth`); otherwise 401.
    pub anonymous_auth: bool,
    /// Bearer tokens on the main port are checked by a TokenReview
    /// (`authentication.webhook.enabled`, `--authentication-token-webhook`).
    pub authentication_token_webhook: bool,
    /// How the main port authorizes (`authorization.mode`, `--authorization-mode`).
    pub authorization_mode: AuthorizationMode,
    /// The Node's `spec.providerID` (`providerID`, `--provider-id`).
    pub provider_id: Option<String>,
}

impl Default for KubeletConfig {
    fn default() -> Self {
        let quantities = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        Self {
            node_name: String::new(),
            node_ip: None,
            pod_manifest_path: None,
            manifest_url: None,
            manifest_url_header: BTreeMap::new(),
            root_dir: PathBuf::from("/var/lib/skiff/kubelet"),
            pod_logs_dir: PathBuf::from("/var/log/pods"),
            address: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 10250,
            read_only_port: 10255,
            tls_cert_file: None,
            tls_private_key_file: None,
            file_check_frequency: Duration::from_secs(20),
            http_check_frequency: Duration::from_secs(20),
            sync_frequency: Duration::from_secs(60),
            cgroup_root: PathBuf::from("/"),
            cgroup_driver: "cgroupfs".to_owned(),
            cgroups_per_qos: true,
            system_reserved: BTreeMap::new(),
            kube_reserved: BTreeMap::new(),
            enforce_node_allocatable: vec!["pods".to_owned()],
            eviction_hard: quantities(&[
                ("memory.available", "100Mi"),
                ("nodefs.available", "10%"),
                ("imagefs.available", "15%"),
                ("nodefs.inodesFree", "5%"),
            ]),
            eviction_pressure_transition_period: Duration::from_secs(300),
            eviction_monitoring_period: Duration::from_secs(10),
            image_gc_high_threshold_percent: 85,
            image_gc_low_threshold_percent: 80,
            image_minimum_gc_age: Duration::from_secs(120),
            minimum_container_ttl: Duration::ZERO,
            max_per_pod_container: 1,
            max_containers: -1,
            serialize_image_pulls: true,
            pod_pids_limit: -1,
            container_log: logs::LogRotatePolicy::default(),
            kubeconfig: None,
            api_connector: skiff_client::in_process::Connector::default(),
            register_node: true,
            register_with_taints: Vec::new(),
            node_labels: BTreeMap::new(),
            node_status_update_frequency: Duration::from_secs(10),
            node_status_report_frequency: Duration::from_secs(300),
            node_lease_duration_seconds: 40,
            kube_api_qps: 50,
            kube_api_burst: 100,
            max_pods: 110,
            cluster_dns: Vec::new(),
            cluster_domain: String::new(),
            client_ca_file: None,
            // The flag defaults (no `--config`); a KubeletConfiguration file starts from
            // the v1beta1 defaults instead (anonymous off, webhook on, Webhook mode).
            anonymous_auth: true,
            authentication_token_webhook: false,
            authorization_mode: AuthorizationMode::AlwaysAllow,
            provider_id: None,
        }
    }
}
