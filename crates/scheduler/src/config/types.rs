//! The `kubescheduler.config.k8s.io/v1` `KubeSchedulerConfiguration` object and the
//! in-tree plugin args (upstream `k8s.io/kube-scheduler/config/v1` `types.go`,
//! `types_pluginargs.go`, and component-base's `LeaderElectionConfiguration`,
//! `ClientConnectionConfiguration`, `DebuggingConfiguration`), with the JSON (and YAML)
//! field names of upstream.
//!
//! Fields whose absence means something (a profile without `schedulerName`, a plugin
//! without `weight`, args left unset) are `Option`s; the others take upstream's default
//! when absent (see [`super::defaults`]). Unknown fields are refused as upstream's strict
//! decoding refuses them, by [`super::decode`].

use std::fmt;

use k8s_openapi::api::core::v1::{NodeAffinity, TopologySpreadConstraint};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use skiff_api::duration::{format_go_duration, parse_go_duration};

/// The group/version of the configuration: `kubescheduler.config.k8s.io/v1`.
pub const API_VERSION: &str = "kubescheduler.config.k8s.io/v1";
/// The kind of the configuration object.
pub const KIND: &str = "KubeSchedulerConfiguration";
/// The profile name pods get when they name none (`default-scheduler`).
pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";

/// A Go duration (`metav1.Duration`): signed nanoseconds, written as Go writes them
/// (`15s`, `1m30s`, `500ms`). Decoding refuses anything but a string in Go's syntax.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Hash)]
pub struct GoDuration(pub i64);

impl GoDuration {
    /// `secs` seconds.
    pub const fn from_secs(secs: i64) -> Self {
        Self(secs.saturating_mul(1_000_000_000))
    }

    /// The signed count of nanoseconds.
    pub const fn nanos(self) -> i64 {
        self.0
    }

    /// The duration as a `std::time::Duration`; None when negative.
    pub fn to_std(self) -> Option<std::time::Duration> {
        u64::try_from(self.0)
            .ok()
            .map(std::time::Duration::from_nanos)
    }
}

impl fmt::Display for GoDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_go_duration(self.0))
    }
}

impl std::str::FromStr for GoDuration {
    type Err = skiff_api::duration::DurationError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_go_duration(s).map(Self)
    }
}

impl Serialize for GoDuration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&format_go_duration(self.0))
    }
}

impl<'de> Deserialize<'de> for GoDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        parse_go_duration(&text)
            .map(Self)
            .map_err(serde::de::Error::custom)
    }
}

/// KubeSchedulerConfiguration (v1). `Default` is the fully defaulted configuration
/// (what an object with only `apiVersion` and `kind` becomes): one `default-scheduler`
/// profile with upstream's plugins and plugin args.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeSchedulerConfiguration {
    /// `kubescheduler.config.k8s.io/v1`.
    #[serde(default)]
    pub api_version: String,
    /// `KubeSchedulerConfiguration`.
    #[serde(default)]
    pub kind: String,
    /// Goroutines (here: tasks) used by the filtering and scoring of one pod; > 0.
    /// Default 16.
    #[serde(default)]
    pub parallelism: Option<i32>,
    /// The leader election client.
    #[serde(default)]
    pub leader_election: LeaderElectionConfiguration,
    /// The API client: kubeconfig, rate limits, content type.
    #[serde(default)]
    pub client_connection: ClientConnectionConfiguration,
    /// Profiling handlers on the secure port (`/debug/pprof`); default true. Skiff has
    /// no Go profiler: accepted and kept, not acted upon.
    #[serde(default)]
    pub enable_profiling: Option<bool>,
    /// Lock contention profiling; default true when profiling is on. Kept, not acted
    /// upon.
    #[serde(default)]
    pub enable_contention_profiling: Option<bool>,
    /// The percentage of the nodes that, once found feasible, ends the search (0:
    /// adaptive, 5% to 50% by cluster size); a profile's value overrides it. 0..=100.
    #[serde(default)]
    pub percentage_of_nodes_to_score: Option<i32>,
    /// The first backoff of an unschedulable pod, in seconds; > 0. Default 1.
    #[serde(default)]
    pub pod_initial_backoff_seconds: Option<i64>,
    /// The longest backoff, in seconds; >= the initial one. Default 10.
    #[serde(default)]
    pub pod_max_backoff_seconds: Option<i64>,
    /// The scheduling profiles, by `schedulerName`.
    #[serde(default)]
    pub profiles: Vec<KubeSchedulerProfile>,
    /// Scheduler extenders (webhooks). Parsed so that a configuration with extenders
    /// is refused with a clear error: Skiff does not call extenders.
    #[serde(default)]
    pub extenders: Vec<Extender>,
    /// With leader election, fill the informer caches only once leader.
    #[serde(default)]
    pub delay_cache_until_active: bool,
}

impl Default for KubeSchedulerConfiguration {
    fn default() -> Self {
        let mut cfg = Self::empty();
        super::defaults::set_defaults(&mut cfg);
        cfg
    }
}

impl KubeSchedulerConfiguration {
    /// The object with only `apiVersion` and `kind` set, before defaulting.
    pub fn empty() -> Self {
        Self {
            api_version: API_VERSION.into(),
            kind: KIND.into(),
            parallelism: None,
            leader_election: LeaderElectionConfiguration::default(),
            client_connection: ClientConnectionConfiguration::default(),
            enable_profiling: None,
            enable_contention_profiling: None,
            percentage_of_nodes_to_score: None,
            pod_initial_backoff_seconds: None,
            pod_max_backoff_seconds: None,
            profiles: Vec::new(),
            extenders: Vec::new(),
            delay_cache_until_active: false,
        }
    }

    /// `parallelism`, or its default (16).
    pub fn parallelism(&self) -> i32 {
        self.parallelism
            .unwrap_or(super::defaults::DEFAULT_PARALLELISM)
    }

    /// The global `percentageOfNodesToScore`, or its default (0: adaptive).
    pub fn percentage_of_nodes_to_score(&self) -> i32 {
        self.percentage_of_nodes_to_score
            .unwrap_or(super::defaults::DEFAULT_PERCENTAGE_OF_NODES_TO_SCORE)
    }

    /// `podInitialBackoffSeconds` as a duration (default 1s; zero when not positive).
    pub fn pod_initial_backoff(&self) -> std::time::Duration {
        let secs = self
            .pod_initial_backoff_seconds
            .unwrap_or(super::defaults::DEFAULT_POD_INITIAL_BACKOFF_SECONDS);
        std::time::Duration::from_secs(u64::try_from(secs).unwrap_or(0))
    }

    /// `podMaxBackoffSeconds` as a duration (default 10s; zero when not positive).
    pub fn pod_max_backoff(&self) -> std::time::Duration {
        let secs = self
            .pod_max_backoff_seconds
            .unwrap_or(super::defaults::DEFAULT_POD_MAX_BACKOFF_SECONDS);
        std::time::Duration::from_secs(u64::try_from(secs).unwrap_or(0))
    }

    /// The profile pods with `schedulerName: name` are scheduled by.
    pub fn profile(&self, name: &str) -> Option<&KubeSchedulerProfile> {
        self.profiles
            .iter()
            .find(|p| p.scheduler_name.as_deref() == Some(name))
    }
}

/// Leader election (component-base `LeaderElectionConfiguration` v1alpha1).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaderElectionConfiguration {
    /// Whether to run leader election before scheduling; default true.
    #[serde(default)]
    pub leader_elect: Option<bool>,
    /// How long non-leaders wait after the last renewal before taking over; default
    /// 15s (a zero duration takes the default too).
    #[serde(default)]
    pub lease_duration: GoDuration,
    /// How long the leader retries renewing before giving up; default 10s.
    #[serde(default)]
    pub renew_deadline: GoDuration,
    /// The wait between two tries to acquire or renew; default 2s.
    #[serde(default)]
    pub retry_period: GoDuration,
    /// The lock object kind; only `leases` is accepted.
    #[serde(default)]
    pub resource_lock: String,
    /// The lock object's name; default `kube-scheduler`.
    #[serde(default)]
    pub resource_name: String,
    /// The lock object's namespace; default `kube-system`.
    #[serde(default)]
    pub resource_namespace: String,
}

impl LeaderElectionConfiguration {
    /// `leaderElect`, true when unset.
    pub fn leader_elect(&self) -> bool {
        self.leader_elect.unwrap_or(true)
    }
}

/// The API client (component-base `ClientConnectionConfiguration` v1alpha1).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientConnectionConfiguration {
    /// The kubeconfig file; empty: in-cluster configuration (or `--kubeconfig`).
    #[serde(default)]
    pub kubeconfig: String,
    /// The `Accept` header; empty: the client's default.
    #[serde(default)]
    pub accept_content_types: String,
    /// The content type of requests; default `application/vnd.kubernetes.protobuf`.
    #[serde(default)]
    pub content_type: String,
    /// Queries per second; default 50 (0 takes the default).
    #[serde(default)]
    pub qps: f32,
    /// The burst above `qps`; default 100 (0 takes the default); >= 0.
    #[serde(default)]
    pub burst: i32,
}

/// One scheduling profile.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeSchedulerProfile {
    /// The name pods select the profile with (`spec.schedulerName`); defaulted to
    /// `default-scheduler` only when it is the one profile.
    #[serde(default)]
    pub scheduler_name: Option<String>,
    /// Overrides the global `percentageOfNodesToScore`; 0..=100.
    #[serde(default)]
    pub percentage_of_nodes_to_score: Option<i32>,
    /// The plugins enabled and disabled at each extension point; after defaulting, the
    /// default plugins merged with these (see [`super::defaults::merge_plugins`]).
    #[serde(default)]
    pub plugins: Option<Plugins>,
    /// Plugin args by plugin name; after defaulting, every in-tree plugin with args has
    /// an entry with its defaulted args.
    #[serde(default)]
    pub plugin_config: Vec<PluginConfig>,
}

impl KubeSchedulerProfile {
    /// The profile's scheduler name ("" when unset).
    pub fn name(&self) -> &str {
        self.scheduler_name.as_deref().unwrap_or("")
    }
}

/// The plugins of each extension point.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Plugins {
    /// Run before a pod enters the active queue.
    #[serde(default)]
    pub pre_enqueue: PluginSet,
    /// Orders the queue; one plugin, the same in every profile.
    #[serde(default)]
    pub queue_sort: PluginSet,
    /// PreFilter.
    #[serde(default)]
    pub pre_filter: PluginSet,
    /// Filter.
    #[serde(default)]
    pub filter: PluginSet,
    /// PostFilter (preemption).
    #[serde(default)]
    pub post_filter: PluginSet,
    /// PreScore.
    #[serde(default)]
    pub pre_score: PluginSet,
    /// Score; `weight` counts here.
    #[serde(default)]
    pub score: PluginSet,
    /// Reserve.
    #[serde(default)]
    pub reserve: PluginSet,
    /// Permit.
    #[serde(default)]
    pub permit: PluginSet,
    /// PreBind.
    #[serde(default)]
    pub pre_bind: PluginSet,
    /// Bind.
    #[serde(default)]
    pub bind: PluginSet,
    /// PostBind.
    #[serde(default)]
    pub post_bind: PluginSet,
    /// Plugins enabled at every extension point they implement.
    #[serde(default)]
    pub multi_point: PluginSet,
}

/// Enabled and disabled plugins of one extension point.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginSet {
    /// Enabled after the default ones, in this order; a default plugin listed here is
    /// re-configured in place (its weight replaced).
    #[serde(default)]
    pub enabled: Vec<Plugin>,
    /// Default plugins to disable; `*` disables them all.
    #[serde(default)]
    pub disabled: Vec<Plugin>,
}

/// A plugin and, for Score, its weight.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Plugin {
    /// The plugin's name.
    pub name: String,
    /// The Score weight; unset or 0 counts as 1.
    #[serde(default)]
    pub weight: Option<i32>,
}

impl Plugin {
    /// A plugin without weight.
    pub fn named(name: &str) -> Self {
        Self {
            name: name.into(),
            weight: None,
        }
    }

    /// A plugin with a Score weight.
    pub fn weighted(name: &str, weight: i32) -> Self {
        Self {
            name: name.into(),
            weight: Some(weight),
        }
    }
}

/// Args of one plugin. The in-tree plugins' args are decoded strictly (unknown fields
/// refused) and defaulted; other plugins' args are kept as given.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginConfig {
    /// The plugin's name.
    pub name: String,
    /// The args object (JSON); `null` when none was given. In-tree args are kept
    /// without their `apiVersion` and `kind` (checked when given).
    #[serde(default)]
    pub args: serde_json::Value,
}

/// A scheduler extender (parsed only: Skiff refuses configurations with extenders).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Extender {
    /// The extender's URL prefix.
    #[serde(default)]
    pub url_prefix: String,
    /// The filter verb.
    #[serde(default)]
    pub filter_verb: String,
    /// The preempt verb.
    #[serde(default)]
    pub preempt_verb: String,
    /// The prioritize verb.
    #[serde(default)]
    pub prioritize_verb: String,
    /// The weight of the prioritize scores.
    #[serde(default)]
    pub weight: i64,
    /// The bind verb.
    #[serde(default)]
    pub bind_verb: String,
    /// HTTPS.
    #[serde(default, rename = "enableHTTPS")]
    pub enable_https: bool,
    /// TLS settings.
    #[serde(default)]
    pub tls_config: Option<ExtenderTlsConfig>,
    /// The timeout of one call.
    #[serde(default)]
    pub http_timeout: GoDuration,
    /// Whether the extender caches nodes.
    #[serde(default)]
    pub node_cache_capable: bool,
    /// Extended resources the extender manages.
    #[serde(default)]
    pub managed_resources: Vec<ExtenderManagedResource>,
    /// Whether scheduling goes on when the extender fails.
    #[serde(default)]
    pub ignorable: bool,
}

/// TLS settings of an extender.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtenderTlsConfig {
    /// Skip server certificate verification.
    #[serde(default)]
    pub insecure: bool,
    /// The SNI server name.
    #[serde(default)]
    pub server_name: String,
    /// Client certificate file.
    #[serde(default)]
    pub cert_file: String,
    /// Client key file.
    #[serde(default)]
    pub key_file: String,
    /// CA file.
    #[serde(default)]
    pub ca_file: String,
    /// Client certificate (base64 of PEM).
    #[serde(default)]
    pub cert_data: String,
    /// Client key (base64 of PEM).
    #[serde(default)]
    pub key_data: String,
    /// CA bundle (base64 of PEM).
    #[serde(default)]
    pub ca_data: String,
}

/// An extended resource managed by an extender.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtenderManagedResource {
    /// The resource name.
    #[serde(default)]
    pub name: String,
    /// Whether the scheduler ignores the resource in its fit checks.
    #[serde(default)]
    pub ignored_by_scheduler: bool,
}

/// `DefaultPreemptionArgs`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DefaultPreemptionArgs {
    /// Minimum candidates as a percentage of the nodes; 0..=100, default 10.
    #[serde(default)]
    pub min_candidate_nodes_percentage: Option<i32>,
    /// Minimum candidates in absolute; >= 0, default 100.
    #[serde(default)]
    pub min_candidate_nodes_absolute: Option<i32>,
}

/// `InterPodAffinityArgs`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InterPodAffinityArgs {
    /// Score weight of existing pods' required affinity to the incoming pod; 0..=100,
    /// default 1.
    #[serde(default)]
    pub hard_pod_affinity_weight: Option<i32>,
    /// Ignore existing pods' preferred terms unless the pod has affinity itself.
    #[serde(default)]
    pub ignore_preferred_terms_of_existing_pods: bool,
}

/// `NodeResourcesFitArgs`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeResourcesFitArgs {
    /// Resources the Filter ignores.
    #[serde(default)]
    pub ignored_resources: Vec<String>,
    /// Resource groups (`example.com`) the Filter ignores.
    #[serde(default)]
    pub ignored_resource_groups: Vec<String>,
    /// The Score strategy; default LeastAllocated over cpu and memory, weight 1 each.
    #[serde(default)]
    pub scoring_strategy: Option<ScoringStrategy>,
}

/// NodeResourcesFit's scoring strategy.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScoringStrategy {
    /// `LeastAllocated`, `MostAllocated` or `RequestedToCapacityRatio`.
    #[serde(default, rename = "type")]
    pub type_: String,
    /// Resources scored, with weights 1..=100 (0 takes 1).
    #[serde(default)]
    pub resources: Vec<ResourceSpec>,
    /// The shape of RequestedToCapacityRatio.
    #[serde(default)]
    pub requested_to_capacity_ratio: Option<RequestedToCapacityRatioParam>,
}

/// RequestedToCapacityRatio's shape.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestedToCapacityRatioParam {
    /// The points of the function, by increasing utilization.
    #[serde(default)]
    pub shape: Vec<UtilizationShapePoint>,
}

/// One point of a utilization-to-score function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UtilizationShapePoint {
    /// Utilization, 0..=100.
    #[serde(default)]
    pub utilization: i32,
    /// Score, 0..=10.
    #[serde(default)]
    pub score: i32,
}

/// A resource and its weight.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSpec {
    /// The resource name.
    #[serde(default)]
    pub name: String,
    /// Its weight.
    #[serde(default)]
    pub weight: i64,
}

impl ResourceSpec {
    /// `name` with `weight`.
    pub fn new(name: &str, weight: i64) -> Self {
        Self {
            name: name.into(),
            weight,
        }
    }
}

/// `PodTopologySpreadArgs`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodTopologySpreadArgs {
    /// Constraints for pods that define none (with `defaultingType: List`).
    #[serde(default)]
    pub default_constraints: Vec<TopologySpreadConstraint>,
    /// `System` (default) or `List`.
    #[serde(default)]
    pub defaulting_type: String,
}

/// `NodeResourcesBalancedAllocationArgs`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeResourcesBalancedAllocationArgs {
    /// Resources balanced; default cpu and memory, weight 1 (the only weight allowed).
    #[serde(default)]
    pub resources: Vec<ResourceSpec>,
}

/// `VolumeBindingArgs`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeBindingArgs {
    /// The PreBind wait for volumes to bind, in seconds; >= 0, default 600.
    #[serde(default)]
    pub bind_timeout_seconds: Option<i64>,
    /// Storage capacity scoring's shape (feature gate StorageCapacityScoring, off in
    /// 1.33: refused when set).
    #[serde(default)]
    pub shape: Option<Vec<UtilizationShapePoint>>,
}

/// `NodeAffinityArgs`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeAffinityArgs {
    /// Node affinity added to every pod's own.
    #[serde(default)]
    pub added_affinity: Option<NodeAffinity>,
}
