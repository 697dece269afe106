//! `KubeletConfiguration` files (kubelet.config.k8s.io/v1beta1, upstream
//! `pkg/kubelet/apis/config/v1beta1` and `validation`): YAML or JSON with the upstream
//! camelCase field names, resolved onto [`KubeletConfig`].
//!
//! Fields Skiff implements are typed and checked; upstream fields Skiff does not implement
//! are listed in [`IGNORED_FIELDS`] (accepted, reported, without effect) or
//! [`REJECTED_FIELDS`] (an error, because ignoring them would change what the kubelet
//! does); anything else is an unknown field. Flags override the file (the caller applies
//! them), then [`validate`] checks the result as upstream's
//! `ValidateKubeletConfiguration` does.
//!
//! The v1beta1 defaults of a file differ from the flag defaults of
//! [`KubeletConfig::default`] as upstream's: `readOnlyPort` 0, anonymous authentication
//! off, `authentication.webhook.enabled` true and `authorization.mode: Webhook`. The
//! webhook cache TTLs (`authentication.webhook.cacheTTL`,
//! `authorization.webhook.cacheAuthorizedTTL` / `cacheUnauthorizedTTL`) are accepted and
//! checked but have no effect: Skiff does not cache review answers.
//!
//! Also home of the parsers of the matching flag formats: Go durations
//! ([`parse_duration`]), `key=value` maps ([`parse_map_string_string`]), eviction
//! thresholds `signal<quantity` ([`parse_eviction_thresholds`]), manifest URL headers
//! ([`parse_url_headers`]), `--register-with-taints` ([`parse_register_with_taints`]),
//! `--node-labels` ([`parse_node_labels`], checked by [`validate_node_labels`]),
//! `--cluster-dns` ([`parse_cluster_dns`]) and `--authorization-mode`
//! ([`parse_authorization_mode`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::{Deserialize, Deserializer};

use crate::error::{Error, Result};
use crate::{AuthorizationMode, KubeletConfig};
use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use skiff_api::{names, quantity};

/// The `apiVersion` a file must have.
pub const API_VERSION: &str = "kubelet.config.k8s.io/v1beta1";
/// The `kind` a file must have.
pub const KIND: &str = "KubeletConfiguration";

/// Upstream fields Skiff accepts without implementing them: a file written for the
/// upstream kubelet (kubeadm's, a distribution's) loads, and each of these is reported
/// at info level.
pub const IGNORED_FIELDS: &[&str] = &[
    "allowedUnsafeSysctls",
    "configMapAndSecretChangeDetectionStrategy",
    "contentType",
    "cpuCFSQuota",
    "cpuCFSQuotaPeriod",
    "cpuManagerPolicy",
    "cpuManagerPolicyOptions",
    "cpuManagerReconcilePeriod",
    "crashLoopBackOff",
    "enableContentionProfiling",
    "enableControllerAttachDetach",
    "enableDebugFlagsHandler",
    "enableDebuggingHandlers",
    "enableProfilingHandler",
    "enableServer",
    "enableSystemLogHandler",
    "enableSystemLogQuery",
    "eventBurst",
    "eventRecordQPS",
    "evictionMaxPodGracePeriod",
    "evictionMinimumReclaim",
    "evictionSoft",
    "evictionSoftGracePeriod",
    "failCgroupV1",
    "failSwapOn",
    "featureGates",
    "hairpinMode",
    "healthzBindAddress",
    "healthzPort",
    "imageMaximumGCAge",
    "imagePullCredentialsVerificationPolicy",
    "imageServiceEndpoint",
    "iptablesDropBit",
    "iptablesMasqueradeBit",
    "kernelMemcgNotification",
    "kubeReservedCgroup",
    "kubeletCgroups",
    "localStorageCapacityIsolation",
    "logging",
    "makeIPTablesUtilChains",
    "maxOpenFiles",
    "maxParallelImagePulls",
    "memoryManagerPolicy",
    "memorySwap",
    "memoryThrottlingFactor",
    "mergeDefaultEvictionSettings",
    "nodeStatusMaxImages",
    "oomScoreAdj",
    "podCIDR",
    "podsPerCore",
    "preloadedImagesVerificationAllowlist",
    "protectKernelDefaults",
    "qosReserved",
    "registryBurst",
    "registryPullQPS",
    "reservedMemory",
    "reservedSystemCPUs",
    "resolvConf",
    "rotateCertificates",
    "runtimeRequestTimeout",
    "seccompDefault",
    "serverTLSBootstrap",
    "showHiddenMetricsForVersion",
    "shutdownGracePeriod",
    "shutdownGracePeriodByPodPriority",
    "shutdownGracePeriodCriticalPods",
    "singleProcessOOMKill",
    "streamingConnectionIdleTimeout",
    "systemCgroups",
    "systemReservedCgroup",
    "tlsCipherSuites",
    "tlsMinVersion",
    "topologyManagerPolicy",
    "topologyManagerPolicyOptions",
    "topologyManagerScope",
    "tracing",
    "userNamespaces",
    "volumePluginDir",
    "volumeStatsAggPeriod",
];

/// Upstream fields Skiff refuses, with the reason: a kubelet that ignored them would
/// behave very differently from what the file asks.
pub const REJECTED_FIELDS: &[(&str, &str)] = &[(
    "runOnce",
    "run-once mode is not supported by Skiff; remove the field",
)];

/// Eviction signals upstream knows (`pkg/kubelet/eviction/api`).
const EVICTION_SIGNALS: &[&str] = &[
    "memory.available",
    "allocatableMemory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "containerfs.available",
    "containerfs.inodesFree",
    "pid.available",
];
/// Values of `enforceNodeAllocatable`.
const ENFORCE_NODE_ALLOCATABLE: &[&str] = &["pods", "system-reserved", "kube-reserved", "none"];
/// Resources that can be reserved (`systemReserved`, `kubeReserved`).
const RESERVABLE_RESOURCES: &[&str] = &["cpu", "memory", "ephemeral-storage", "pid"];

/// A loaded `KubeletConfiguration`: the kubelet settings, the runtime endpoint (which the
/// caller uses to pick its CRI), and the ignored fields present in the file.
#[derive(Debug, Clone)]
pub struct KubeletConfigFile {
    /// The file's settings over the v1beta1 defaults.
    pub config: KubeletConfig,
    /// `containerRuntimeEndpoint`, e.g. `unix:///run/containerd/containerd.sock`.
    pub container_runtime_endpoint: Option<String>,
    /// Fields of [`IGNORED_FIELDS`] present in the file, in file order.
    pub ignored_fields: Vec<String>,
}

/// Reads and parses a `KubeletConfiguration` file (see [`parse`]), logging each ignored
/// field at info level. Errors name the file and the field.
pub fn load(path: &Path) -> anyhow::Result<KubeletConfigFile> {
    let content = std::fs::read_to_string(path)
        .with_context(|| format!("reading kubelet configuration file {}", path.display()))?;
    let file = parse(&content).map_err(|e| {
        anyhow::anyhow!("invalid kubelet configuration file {}: {e}", path.display())
    })?;
    for field in &file.ignored_fields {
        tracing::info!(file = %path.display(), field = %field, "kubelet configuration field is not implemented by Skiff; ignoring it");
    }
    Ok(file)
}

/// Parses a `KubeletConfiguration` document (YAML or JSON) onto the v1beta1 defaults:
/// [`KubeletConfig::default`] except `readOnlyPort` (0, disabled) and the main port's
/// authentication and authorization (anonymous off, token webhook on, `Webhook` mode).
/// As upstream's defaulting, a zero duration, `port: 0`, `kubeAPIBurst: 0`, `maxPods: 0`
/// or `nodeLeaseDurationSeconds: 0` means the default (but `kubeAPIQPS: 0` is 0), and
/// `nodeStatusReportFrequency` defaults to an explicit `nodeStatusUpdateFrequency`.
/// Maps (`evictionHard`, `systemReserved`, ...) replace their defaults
/// entirely, as upstream.
///
/// Errors (`field: message`): not a mapping, wrong `apiVersion` or `kind`, an unknown or
/// rejected field, a value of the wrong type, a bad duration, quantity, percentage,
/// address or port. Cross-field rules are left to [`validate`], after flags.
pub fn parse(content: &str) -> Result<KubeletConfigFile> {
    let document: serde_yaml_ng::Value = serde_yaml_ng::from_str(content)
        .map_err(|e| Error::Config(format!("not valid YAML: {e}")))?;
    let serde_yaml_ng::Value::Mapping(mut fields) = document else {
        return Err(Error::Config(
            "the document must be a KubeletConfiguration mapping".to_owned(),
        ));
    };
    let mut ignored_fields = Vec::new();
    let mut problems = Vec::new();
    fields.retain(|key, _| {
        let name = key.as_str().unwrap_or("");
        if let Some((_, why)) = REJECTED_FIELDS.iter().find(|(f, _)| *f == name) {
            problems.push(format!("{name}: {why}"));
            false
        } else if IGNORED_FIELDS.contains(&name) {
            ignored_fields.push(name.to_owned());
            false
        } else {
            true
        }
    });
    if !problems.is_empty() {
        return Err(Error::Config(problems.join("; ")));
    }
    let file: FileFields = serde_yaml_ng::from_value(fields.clone().into())
        .map_err(|whole| Error::Config(field_error(&fields, &whole)))?;
    let (config, container_runtime_endpoint) = file.resolve()?;
    Ok(KubeletConfigFile {
        config,
        container_runtime_endpoint,
        ignored_fields,
    })
}

/// The first field of `fields` that does not deserialize alone, as `field: error`
/// (serde's errors on a whole document do not always name the field).
fn field_error(fields: &serde_yaml_ng::Mapping, whole: &serde_yaml_ng::Error) -> String {
    fields
        .iter()
        .find_map(|(key, value)| {
            let one = serde_yaml_ng::Mapping::from_iter([(key.clone(), value.clone())]);
            serde_yaml_ng::from_value::<FileFields>(one.into())
                .err()
                .map(|e| format!("{}: {e}", key.as_str().unwrap_or("?")))
        })
        .unwrap_or_else(|| whole.to_string())
}

/// The `KubeletConfiguration` fields Skiff implements, as written in the file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FileFields {
    api_version: Option<String>,
    kind: Option<String>,
    static_pod_path: Option<String>,
    #[serde(rename = "staticPodURL")]
    static_pod_url: Option<String>,
    #[serde(rename = "staticPodURLHeader")]
    static_pod_url_header: Option<BTreeMap<String, Vec<String>>>,
    pod_logs_dir: Option<String>,
    #[serde(default, deserialize_with = "duration")]
    sync_frequency: Option<Duration>,
    #[serde(default, deserialize_with = "duration")]
    file_check_frequency: Option<Duration>,
    #[serde(default, deserialize_with = "duration")]
    http_check_frequency: Option<Duration>,
    address: Option<String>,
    port: Option<i64>,
    read_only_port: Option<i64>,
    tls_cert_file: Option<String>,
    tls_private_key_file: Option<String>,
    cgroup_root: Option<String>,
    cgroup_driver: Option<String>,
    #[serde(rename = "cgroupsPerQOS")]
    cgroups_per_qos: Option<bool>,
    system_reserved: Option<BTreeMap<String, String>>,
    kube_reserved: Option<BTreeMap<String, String>>,
    enforce_node_allocatable: Option<Vec<String>>,
    eviction_hard: Option<BTreeMap<String, String>>,
    #[serde(default, deserialize_with = "duration")]
    eviction_pressure_transition_period: Option<Duration>,
    #[serde(rename = "imageGCHighThresholdPercent")]
    image_gc_high_threshold_percent: Option<i32>,
    #[serde(rename = "imageGCLowThresholdPercent")]
    image_gc_low_threshold_percent: Option<i32>,
    #[serde(default, deserialize_with = "duration")]
    #[serde(rename = "imageMinimumGCAge")]
    image_minimum_gc_age: Option<Duration>,
    serialize_image_pulls: Option<bool>,
    container_runtime_endpoint: Option<String>,
    container_log_max_size: Option<Quantity>,
    container_log_max_files: Option<i32>,
    container_log_max_workers: Option<i32>,
    #[serde(default, deserialize_with = "duration")]
    container_log_monitor_interval: Option<Duration>,
    pod_pids_limit: Option<i64>,
    register_node: Option<bool>,
    register_with_taints: Option<Vec<TaintFields>>,
    #[serde(default, deserialize_with = "duration")]
    node_status_update_frequency: Option<Duration>,
    #[serde(default, deserialize_with = "duration")]
    node_status_report_frequency: Option<Duration>,
    node_lease_duration_seconds: Option<i32>,
    #[serde(rename = "kubeAPIQPS")]
    kube_api_qps: Option<i32>,
    #[serde(rename = "kubeAPIBurst")]
    kube_api_burst: Option<i32>,
    max_pods: Option<i32>,
    #[serde(rename = "clusterDNS")]
    cluster_dns: Option<Vec<String>>,
    cluster_domain: Option<String>,
    authentication: Option<AuthenticationFields>,
    authorization: Option<AuthorizationFields>,
    #[serde(rename = "providerID")]
    provider_id: Option<String>,
}

/// A `registerWithTaints` item (a core/v1 Taint). `key` and `effect` may be missing, as
/// upstream decodes them; [`validate`] checks them.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct TaintFields {
    #[serde(default)]
    key: String,
    value: Option<String>,
    #[serde(default)]
    effect: String,
    time_added: Option<Time>,
}

/// `authentication` (upstream `KubeletAuthentication`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct AuthenticationFields {
    x509: Option<X509Fields>,
    webhook: Option<AuthenticationWebhookFields>,
    anonymous: Option<AnonymousFields>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct X509Fields {
    #[serde(rename = "clientCAFile")]
    client_ca_file: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct AuthenticationWebhookFields {
    enabled: Option<bool>,
    /// Accepted and checked, without effect: Skiff does not cache TokenReview answers.
    #[serde(rename = "cacheTTL", default, deserialize_with = "duration")]
    _cache_ttl: Option<Duration>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct AnonymousFields {
    enabled: Option<bool>,
}

/// `authorization` (upstream `KubeletAuthorization`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct AuthorizationFields {
    mode: Option<String>,
    #[serde(rename = "webhook")]
    _webhook: Option<AuthorizationWebhookFields>,
}

/// Accepted and checked, without effect: Skiff does not cache SubjectAccessReview answers.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct AuthorizationWebhookFields {
    #[serde(rename = "cacheAuthorizedTTL", default, deserialize_with = "duration")]
    _cache_authorized_ttl: Option<Duration>,
    #[serde(
        rename = "cacheUnauthorizedTTL",
        default,
        deserialize_with = "duration"
    )]
    _cache_unauthorized_ttl: Option<Duration>,
}

impl FileFields {
    /// The file's values over the v1beta1 defaults, with per-field value checks.
    fn resolve(self) -> Result<(KubeletConfig, Option<String>)> {
        expect_field("apiVersion", self.api_version.as_deref(), API_VERSION)?;
        expect_field("kind", self.kind.as_deref(), KIND)?;
        let mut c = KubeletConfig {
            read_only_port: 0,
            ..KubeletConfig::default()
        };
        let path = |s: String| (!s.is_empty()).then(|| PathBuf::from(s));
        if let Some(p) = self.static_pod_path {
            c.pod_manifest_path = path(p);
        }
        if let Some(url) = self.static_pod_url {
            c.manifest_url = (!url.is_empty()).then_some(url);
        }
        set(&mut c.manifest_url_header, self.static_pod_url_header);
        if let Some(dir) = self.pod_logs_dir.and_then(path) {
            c.pod_logs_dir = dir;
        }
        set_duration(&mut c.sync_frequency, self.sync_frequency);
        set_duration(&mut c.file_check_frequency, self.file_check_frequency);
        set_duration(&mut c.http_check_frequency, self.http_check_frequency);
        if let Some(address) = self.address {
            c.address = address
                .parse()
                .map_err(|_| Error::Config(format!("address: invalid IP address {address:?}")))?;
        }
        if let Some(port) = self.port.filter(|p| *p != 0) {
            c.port = port_number("port", port)?;
        }
        if let Some(port) = self.read_only_port {
            c.read_only_port = port_number("readOnlyPort", port)?;
        }
        if let Some(p) = self.tls_cert_file {
            c.tls_cert_file = path(p);
        }
        if let Some(p) = self.tls_private_key_file {
            c.tls_private_key_file = path(p);
        }
        if let Some(root) = self.cgroup_root.and_then(path) {
            c.cgroup_root = root;
        }
        set(&mut c.cgroup_driver, self.cgroup_driver);
        set(&mut c.cgroups_per_qos, self.cgroups_per_qos);
        set(&mut c.system_reserved, self.system_reserved);
        set(&mut c.kube_reserved, self.kube_reserved);
        set(
            &mut c.enforce_node_allocatable,
            self.enforce_node_allocatable,
        );
        set(&mut c.eviction_hard, self.eviction_hard);
        set_duration(
            &mut c.eviction_pressure_transition_period,
            self.eviction_pressure_transition_period,
        );
        set(
            &mut c.image_gc_high_threshold_percent,
            self.image_gc_high_threshold_percent,
        );
        set(
            &mut c.image_gc_low_threshold_percent,
            self.image_gc_low_threshold_percent,
        );
        set_duration(&mut c.image_minimum_gc_age, self.image_minimum_gc_age);
        set(&mut c.serialize_image_pulls, self.serialize_image_pulls);
        if let Some(size) = self.container_log_max_size {
            c.container_log.max_size = parse_log_max_size(&size.0)
                .map_err(|e| Error::Config(format!("containerLogMaxSize: {e}")))?;
        }
        if let Some(files) = self.container_log_max_files {
            // Checked by `validate` (at least 2), after flags.
            c.container_log.max_files = usize::try_from(files).unwrap_or(0);
        }
        if let Some(workers) = self.container_log_max_workers {
            c.container_log.max_workers = usize::try_from(workers).unwrap_or(0);
        }
        set_duration(
            &mut c.container_log.monitor_interval,
            self.container_log_monitor_interval,
        );
        // v1beta1: nil or negative means -1 (the node allocatable pid limit).
        c.pod_pids_limit = self.pod_pids_limit.filter(|l| *l >= 0).unwrap_or(-1);
        set(&mut c.register_node, self.register_node);
        if let Some(taints) = self.register_with_taints {
            c.register_with_taints = taints.into_iter().map(TaintFields::into_taint).collect();
        }
        // As upstream's defaulting: an explicit update frequency without a report frequency
        // makes the report frequency the same (backward compatibility).
        let update_frequency = self.node_status_update_frequency.filter(|d| !d.is_zero());
        set(&mut c.node_status_update_frequency, update_frequency);
        c.node_status_report_frequency = self
            .node_status_report_frequency
            .filter(|d| !d.is_zero())
            .or(update_frequency)
            .unwrap_or(c.node_status_report_frequency);
        set(
            &mut c.node_lease_duration_seconds,
            self.node_lease_duration_seconds.filter(|s| *s != 0),
        );
        // `kubeAPIQPS` is a pointer upstream: an explicit 0 stays 0; `kubeAPIBurst` and
        // `maxPods` are not: 0 means the default.
        set(&mut c.kube_api_qps, self.kube_api_qps);
        set(
            &mut c.kube_api_burst,
            self.kube_api_burst.filter(|b| *b != 0),
        );
        set(&mut c.max_pods, self.max_pods.filter(|m| *m != 0));
        if let Some(servers) = self.cluster_dns {
            c.cluster_dns = parse_cluster_dns(&servers);
        }
        set(&mut c.cluster_domain, self.cluster_domain);
        if let Some(id) = self.provider_id {
            c.provider_id = (!id.is_empty()).then_some(id);
        }
        // The v1beta1 defaults differ from the flag defaults (KubeletConfig::default):
        // anonymous requests refused, bearer tokens reviewed, Webhook authorization.
        let authn = self.authentication.unwrap_or_default();
        c.client_ca_file = authn.x509.and_then(|x| x.client_ca_file).and_then(path);
        c.anonymous_auth = authn.anonymous.and_then(|a| a.enabled).unwrap_or(false);
        c.authentication_token_webhook = authn.webhook.and_then(|w| w.enabled).unwrap_or(true);
        c.authorization_mode = match self.authorization.and_then(|a| a.mode) {
            Some(mode) if !mode.is_empty() => parse_authorization_mode(&mode)
                .map_err(|e| Error::Config(format!("authorization.mode: {e}")))?,
            _ => AuthorizationMode::Webhook,
        };
        let endpoint = self.container_runtime_endpoint.filter(|e| !e.is_empty());
        Ok((c, endpoint))
    }
}

impl TaintFields {
    fn into_taint(self) -> Taint {
        Taint {
            key: self.key,
            value: self.value,
            effect: self.effect,
            time_added: self.time_added,
        }
    }
}

fn set<T>(target: &mut T, value: Option<T>) {
    if let Some(value) = value {
        *target = value;
    }
}

/// Zero durations keep the default, as upstream's v1beta1 defaulting (kubeadm writes `0s`).
fn set_duration(target: &mut Duration, value: Option<Duration>) {
    set(target, value.filter(|d| !d.is_zero()));
}

fn expect_field(field: &str, value: Option<&str>, expected: &str) -> Result<()> {
    match value {
        Some(v) if v == expected => Ok(()),
        Some(v) => Err(Error::Config(format!(
            "{field}: must be {expected:?}, not {v:?}"
        ))),
        None => Err(Error::Config(format!(
            "{field}: Required value (must be {expected:?})"
        ))),
    }
}

fn port_number(field: &str, port: i64) -> Result<u16> {
    u16::try_from(port)
        .map_err(|_| Error::Config(format!("{field}: {port} must be between 0 and 65535")))
}

/// `containerLogMaxSize` (and `--container-log-max-size`): a quantity of bytes, such as
/// `10Mi` or `50M`, greater than zero.
pub fn parse_log_max_size(text: &str) -> Result<u64> {
    let bytes = quantity::parse(&Quantity(text.to_owned()))
        .ok_or_else(|| Error::Config(format!("invalid quantity {text:?} (examples: 10Mi, 50M)")))?;
    if bytes < 1.0 {
        return Err(Error::Config(format!("{text:?} must be greater than zero")));
    }
    Ok(bytes.ceil() as u64)
}

/// serde helper: a Go duration string (`metav1.Duration`).
fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let s = String::deserialize(d)?;
    parse_duration(&s)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

/// Parses a Go duration (`time.ParseDuration`): `0`, or a sequence of decimal numbers
/// with units `ns`, `us` (`µs`), `ms`, `s`, `m`, `h`, e.g. `1m30s`, `1.5h`, `300ms`.
/// Negative durations are refused (no kubelet setting takes one).
pub fn parse_duration(s: &str) -> Result<Duration> {
    let invalid = || {
        Error::Config(format!(
            "invalid duration {s:?} (examples: 20s, 1m30s, 500ms)"
        ))
    };
    let text = s.trim().strip_prefix('+').unwrap_or(s.trim());
    if text.starts_with('-') {
        return Err(Error::Config(format!(
            "invalid duration {s:?}: must not be negative"
        )));
    }
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    if text.is_empty() {
        return Err(invalid());
    }
    let mut rest = text;
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(invalid)?;
        let (number, tail) = rest.split_at(number_end);
        let unit_end = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_end);
        if number.is_empty() || number == "." {
            return Err(invalid());
        }
        let value: f64 = number.parse().map_err(|_| invalid())?;
        let seconds = match unit {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(invalid()),
        };
        total += value * seconds;
        rest = tail;
    }
    Duration::try_from_secs_f64(total).map_err(|_| invalid())
}

/// Parses `k1=v1,k2=v2` (upstream `MapStringString`, e.g. `--system-reserved
/// cpu=200m,memory=500Mi`); an empty string is an empty map.
pub fn parse_map_string_string(s: &str) -> Result<BTreeMap<String, String>> {
    parse_pairs(s, '=')
}

/// Parses eviction thresholds `signal<quantity` separated by commas (upstream
/// `LangleSeparatedMapStringString`, e.g. `--eviction-hard
/// memory.available<100Mi,nodefs.available<10%`).
pub fn parse_eviction_thresholds(s: &str) -> Result<BTreeMap<String, String>> {
    parse_pairs(s, '<')
}

fn parse_pairs(s: &str, separator: char) -> Result<BTreeMap<String, String>> {
    let mut map = BTreeMap::new();
    for pair in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once(separator).ok_or_else(|| {
            Error::Config(format!(
                "malformed pair {pair:?}, expected key{separator}value"
            ))
        })?;
        let key = key.trim();
        if key.is_empty() {
            return Err(Error::Config(format!("malformed pair {pair:?}: empty key")));
        }
        map.insert(key.to_owned(), value.trim().to_owned());
    }
    Ok(map)
}

/// Parses `--manifest-url-header` values: each `name:value` pairs separated by commas,
/// repeated flags accumulate (upstream `ColonSeparatedMultimapStringString`), e.g.
/// `a:hello,b:again` then `b:beautiful` gives `a: [hello]`, `b: [again, beautiful]`.
pub fn parse_url_headers(values: &[String]) -> Result<BTreeMap<String, Vec<String>>> {
    let mut headers: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for value in values {
        for pair in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, v) = pair.split_once(':').ok_or_else(|| {
                Error::Config(format!("malformed header {pair:?}, expected name:value"))
            })?;
            let name = name.trim();
            if name.is_empty() {
                return Err(Error::Config(format!(
                    "malformed header {pair:?}: empty name"
                )));
            }
            headers
                .entry(name.to_owned())
                .or_default()
                .push(v.trim().to_owned());
        }
    }
    Ok(headers)
}

/// Parses `authorization.mode` / `--authorization-mode`: `AlwaysAllow` or `Webhook`
/// (upstream `BuildAuthz`). Errors: empty ("no authorization mode specified") or any
/// other value ("unknown authorization mode X").
pub fn parse_authorization_mode(mode: &str) -> anyhow::Result<AuthorizationMode> {
    match mode {
        "AlwaysAllow" => Ok(AuthorizationMode::AlwaysAllow),
        "Webhook" => Ok(AuthorizationMode::Webhook),
        "" => anyhow::bail!("no authorization mode specified"),
        other => anyhow::bail!("unknown authorization mode {other}"),
    }
}

/// The DNS servers of `clusterDNS` / `--cluster-dns` (comma-separated on the command
/// line). As upstream's `NewMainKubelet`, an entry that is not an IP address (Go's
/// sloppy parser: IPv4 octets may have leading zeros) is logged and skipped, not an
/// error; entries are not trimmed.
pub fn parse_cluster_dns(entries: &[String]) -> Vec<std::net::IpAddr> {
    entries
        .iter()
        .filter_map(|entry| {
            let ip = parse_ip_sloppy(entry);
            if ip.is_none() {
                tracing::warn!(ip = %entry, "Invalid clusterDNS IP; skipping it");
            }
            ip
        })
        .collect()
}

/// An IP address as Go's `netutils.ParseIPSloppy`: the standard forms, plus dotted IPv4
/// with leading zeros (`010.0.0.1` is 10.0.0.1, decimal).
fn parse_ip_sloppy(text: &str) -> Option<std::net::IpAddr> {
    if let Ok(ip) = text.parse() {
        return Some(ip);
    }
    let octets: Vec<u8> = text
        .split('.')
        .map(|part| {
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            part.parse::<u16>().ok().and_then(|v| u8::try_from(v).ok())
        })
        .collect::<Option<_>>()?;
    let octets: [u8; 4] = octets.try_into().ok()?;
    Some(std::net::IpAddr::from(octets))
}

/// The taints of `--register-with-taints` / `registerWithTaints`, as
/// [`parse_register_with_taints`] returns them (a named type, so that flag parsers can
/// hold one value of it).
pub type RegisterWithTaints = Vec<Taint>;

/// Parses `--register-with-taints`: comma-separated `key=value:Effect` or `key:Effect`
/// (upstream `RegisterWithTaintsVar`, which uses `taints.ParseTaints`). An empty string is
/// no taints. Effects are `NoSchedule`, `PreferNoSchedule` and `NoExecute`; keys are
/// qualified names and values label values. As upstream, an entry ending in `-` (a
/// removal, in kubectl's syntax) is checked and then dropped.
///
/// Errors (upstream's text): `invalid taint effect: X, unsupported taint effect`,
/// `invalid taint spec: S[, reasons]` (no effect, several `=` or `:`, a bad key or value),
/// `duplicated taints with the same key and effect: {key value Effect <nil>}`.
pub fn parse_register_with_taints(s: &str) -> anyhow::Result<RegisterWithTaints> {
    if s.is_empty() {
        return Ok(Vec::new());
    }
    let mut taints: Vec<Taint> = Vec::new();
    for spec in s.split(',') {
        if let Some(removed) = spec.strip_suffix('-') {
            parse_taint(removed)?;
            continue;
        }
        let taint = parse_taint(spec)?;
        if taint.effect.is_empty() {
            anyhow::bail!("invalid taint spec: {spec}");
        }
        if taints
            .iter()
            .any(|t| t.key == taint.key && t.effect == taint.effect)
        {
            anyhow::bail!(
                "duplicated taints with the same key and effect: {{{} {} {} <nil>}}",
                taint.key,
                taint.value.as_deref().unwrap_or(""),
                taint.effect
            );
        }
        taints.push(taint);
    }
    Ok(taints)
}

/// One taint of `key=value:Effect`, `key:Effect` or `key` (upstream `parseTaint`).
fn parse_taint(spec: &str) -> anyhow::Result<Taint> {
    let parts: Vec<&str> = spec.split(':').collect();
    let (key, value, effect) = match parts.as_slice() {
        [key] => (*key, None, ""),
        [key_value, effect] => {
            validate_taint_effect(effect)?;
            let kv: Vec<&str> = key_value.split('=').collect();
            match kv.as_slice() {
                [key] => (*key, None, *effect),
                [key, value] => {
                    let errs = names::is_valid_label_value(value);
                    if !errs.is_empty() {
                        anyhow::bail!("invalid taint spec: {spec}, {}", errs.join("; "));
                    }
                    (*key, Some(*value), *effect)
                }
                _ => anyhow::bail!("invalid taint spec: {spec}"),
            }
        }
        _ => anyhow::bail!("invalid taint spec: {spec}"),
    };
    let errs = names::is_qualified_name(key);
    if !errs.is_empty() {
        anyhow::bail!("invalid taint spec: {spec}, {}", errs.join("; "));
    }
    Ok(Taint {
        key: key.to_owned(),
        value: value.map(str::to_owned),
        effect: effect.to_owned(),
        time_added: None,
    })
}

/// The taint effects a node may carry.
const TAINT_EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];

fn validate_taint_effect(effect: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        TAINT_EFFECTS.contains(&effect),
        "invalid taint effect: {effect}, unsupported taint effect"
    );
    Ok(())
}

/// Why a taint of `registerWithTaints` is invalid (upstream `CheckTaintValidation`): the
/// key is not a qualified name, the value not a label value, or the effect is unknown.
fn check_taint(taint: &Taint) -> Option<String> {
    let errs = names::is_qualified_name(&taint.key);
    if !errs.is_empty() {
        return Some(format!("invalid taint key: {}", errs.join("; ")));
    }
    if let Some(value) = taint.value.as_deref().filter(|v| !v.is_empty()) {
        let errs = names::is_valid_label_value(value);
        if !errs.is_empty() {
            return Some(format!("invalid taint value: {}", errs.join("; ")));
        }
    }
    if !taint.effect.is_empty() {
        return validate_taint_effect(&taint.effect)
            .err()
            .map(|e| e.to_string());
    }
    None
}

/// Parses `--node-labels` values: `key=value` pairs separated by commas, keys and values
/// trimmed, a pair without `=` has an empty value; repeated flags accumulate and a later
/// key wins (upstream `cliflag.ConfigurationMap`). Never fails: the labels are checked by
/// [`validate_node_labels`].
pub fn parse_node_labels(values: &[String]) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    for pair in values
        .iter()
        .flat_map(|value| value.split(','))
        .filter(|p| !p.is_empty())
    {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        labels.insert(key.trim().to_owned(), value.trim().to_owned());
    }
    labels
}

/// Label keys in the `kubernetes.io` / `k8s.io` namespaces a kubelet may set on its own
/// Node (upstream `k8s.io/kubelet/pkg/apis.KubeletLabels()`, sorted).
pub const KUBELET_LABELS: &[&str] = &[
    "beta.kubernetes.io/arch",
    "beta.kubernetes.io/instance-type",
    "beta.kubernetes.io/os",
    "failure-domain.beta.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "kubernetes.io/arch",
    "kubernetes.io/hostname",
    "kubernetes.io/os",
    "node.kubernetes.io/instance-type",
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
];

/// Label namespaces (and their subdomains) a kubelet may use on its own Node (upstream
/// `KubeletLabelNamespaces()`).
pub const KUBELET_LABEL_NAMESPACES: &[&str] = &["kubelet.kubernetes.io", "node.kubernetes.io"];

/// The namespace (prefix before the first `/`) of a label key; empty without one.
fn label_namespace(key: &str) -> &str {
    key.split_once('/').map_or("", |(namespace, _)| namespace)
}

fn in_namespace(namespace: &str, domain: &str) -> bool {
    namespace == domain
        || namespace
            .strip_suffix(domain)
            .is_some_and(|rest| rest.ends_with('.'))
}

/// Whether a kubelet may set this label on its own Node (upstream
/// `kubeletapis.IsKubeletLabel`): one of [`KUBELET_LABELS`] or in one of
/// [`KUBELET_LABEL_NAMESPACES`] or their subdomains.
pub fn is_kubelet_label(key: &str) -> bool {
    KUBELET_LABELS.contains(&key)
        || KUBELET_LABEL_NAMESPACES
            .iter()
            .any(|allowed| in_namespace(label_namespace(key), allowed))
}

/// Whether a label key is in the `kubernetes.io` or `k8s.io` namespace or a subdomain of
/// them (upstream `isKubernetesLabel` of `cmd/kubelet/app/options`).
fn is_kubernetes_label(key: &str) -> bool {
    let namespace = label_namespace(key);
    in_namespace(namespace, "kubernetes.io") || in_namespace(namespace, "k8s.io")
}

/// Checks `--node-labels` as upstream's `ValidateKubeletFlags`: labels in the
/// `kubernetes.io` / `k8s.io` namespaces must be [kubelet labels](is_kubelet_label) (the
/// NodeRestriction admission plugin would refuse the others), then every key must be a
/// qualified name and every value a label value.
///
/// Errors, upstream's text: `unknown 'kubernetes.io' or 'k8s.io' labels specified with
/// --node-labels: [a b]` followed by the allowed prefixes and labels, or `invalid node
/// labels: 'key' - reasons; ...` (a bad value is named by the value, as upstream).
pub fn validate_node_labels(labels: &BTreeMap<String, String>) -> anyhow::Result<()> {
    let unknown: Vec<&str> = labels
        .keys()
        .filter(|k| is_kubernetes_label(k) && !is_kubelet_label(k))
        .map(String::as_str)
        .collect();
    if !unknown.is_empty() {
        anyhow::bail!(
            "unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: [{}]\n\
             --node-labels in the 'kubernetes.io' namespace must begin with an allowed prefix \
             ({}) or be in the specifically allowed set ({})",
            unknown.join(" "),
            KUBELET_LABEL_NAMESPACES.join(", "),
            KUBELET_LABELS.join(", ")
        );
    }
    let mut invalid: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (key, value) in labels {
        let errs = names::is_qualified_name(key);
        if !errs.is_empty() {
            invalid.entry(key).or_default().extend(errs);
        }
        let errs = names::is_valid_label_value(value);
        if !errs.is_empty() {
            invalid.entry(value).or_default().extend(errs);
        }
    }
    if !invalid.is_empty() {
        let described: Vec<String> = invalid
            .iter()
            .map(|(what, errs)| format!("'{what}' - {}", errs.join(", ")))
            .collect();
        anyhow::bail!("invalid node labels: {}", described.join("; "));
    }
    Ok(())
}

/// Checks a resolved configuration (file and flags), as upstream's
/// `ValidateKubeletConfiguration` plus Skiff's limits. The error lists every problem as
/// `field: message` (upstream field names), joined by `; `.
pub fn validate(c: &KubeletConfig) -> Result<()> {
    let mut errors = Vec::new();
    for (field, value) in [
        ("syncFrequency", c.sync_frequency),
        ("fileCheckFrequency", c.file_check_frequency),
        ("httpCheckFrequency", c.http_check_frequency),
        ("nodeStatusUpdateFrequency", c.node_status_update_frequency),
        ("nodeStatusReportFrequency", c.node_status_report_frequency),
    ] {
        if value.is_zero() {
            errors.push(format!("{field}: must be greater than zero"));
        }
    }
    if c.cgroup_driver != "cgroupfs" {
        errors.push(format!(
            "cgroupDriver: unsupported value {:?}: Skiff supports only \"cgroupfs\"",
            c.cgroup_driver
        ));
    }
    for (field, value) in [
        (
            "imageGCHighThresholdPercent",
            c.image_gc_high_threshold_percent,
        ),
        (
            "imageGCLowThresholdPercent",
            c.image_gc_low_threshold_percent,
        ),
    ] {
        if !(0..=100).contains(&value) {
            errors.push(format!("{field}: {value} must be between 0 and 100"));
        }
    }
    if c.image_gc_low_threshold_percent >= c.image_gc_high_threshold_percent {
        errors.push(format!(
            "imageGCLowThresholdPercent: {} must be less than imageGCHighThresholdPercent ({})",
            c.image_gc_low_threshold_percent, c.image_gc_high_threshold_percent
        ));
    }
    // Upstream's checks of the container log settings.
    if c.container_log.max_files < 2 {
        errors.push("containerLogMaxFiles: must be greater than 1".to_owned());
    }
    if c.container_log.max_workers < 1 {
        errors.push("containerLogMaxWorkers: must be greater than or equal to 1".to_owned());
    }
    if c.container_log.monitor_interval < Duration::from_secs(3) {
        errors.push(
            "containerLogMonitorInterval: must be a positive time duration greater than or equal to 3s"
                .to_owned(),
        );
    }
    // Upstream's checks of the cluster settings.
    if c.node_lease_duration_seconds <= 0 {
        errors.push("nodeLeaseDurationSeconds: must be greater than 0".to_owned());
    }
    for (field, value) in [
        ("kubeAPIBurst (--kube-api-burst)", c.kube_api_burst),
        ("kubeAPIQPS (--kube-api-qps)", c.kube_api_qps),
        ("maxPods (--max-pods)", c.max_pods),
    ] {
        if value < 0 {
            errors.push(format!("{field}: {value} must not be a negative number"));
        }
    }
    for (i, taint) in c.register_with_taints.iter().enumerate() {
        if let Some(why) = check_taint(taint) {
            errors.push(format!(
                "registerWithTaints[{i}]: invalid taint {}={}:{}: {why}",
                taint.key,
                taint.value.as_deref().unwrap_or(""),
                taint.effect
            ));
        }
        if taint.time_added.is_some() {
            errors.push(format!(
                "registerWithTaints[{i}]: taint.TimeAdded is not nil"
            ));
        }
    }
    if c.max_per_pod_container < 0 {
        errors.push("maximumDeadContainersPerContainer: must not be negative".to_owned());
    }
    if let Some(url) = &c.manifest_url
        && !(url.starts_with("http://") || url.starts_with("https://"))
    {
        errors.push(format!(
            "staticPodURL: {url:?} must be an http:// or https:// URL"
        ));
    }
    for (field, reserved) in [
        ("systemReserved", &c.system_reserved),
        ("kubeReserved", &c.kube_reserved),
    ] {
        for (resource, amount) in reserved {
            if !RESERVABLE_RESOURCES.contains(&resource.as_str()) {
                errors.push(format!(
                    "{field}[{resource}]: unsupported resource: supported resources: {}",
                    RESERVABLE_RESOURCES.join(", ")
                ));
            } else if !is_non_negative_quantity(amount) {
                errors.push(format!("{field}[{resource}]: invalid quantity {amount:?}"));
            }
        }
    }
    for value in &c.enforce_node_allocatable {
        if !ENFORCE_NODE_ALLOCATABLE.contains(&value.as_str()) {
            errors.push(format!(
                "enforceNodeAllocatable: unsupported value {value:?}: supported values: {}",
                ENFORCE_NODE_ALLOCATABLE.join(", ")
            ));
        }
    }
    if c.enforce_node_allocatable.len() > 1
        && c.enforce_node_allocatable.iter().any(|v| v == "none")
    {
        errors.push(
            "enforceNodeAllocatable: \"none\" cannot be combined with other values".to_owned(),
        );
    }
    if c.enforce_node_allocatable.iter().any(|v| v != "none") && !c.cgroups_per_qos {
        errors.push(
            "enforceNodeAllocatable: requires cgroupsPerQOS to be true (or the value \"none\")"
                .to_owned(),
        );
    }
    for (signal, threshold) in &c.eviction_hard {
        if !EVICTION_SIGNALS.contains(&signal.as_str()) {
            errors.push(format!("evictionHard[{signal}]: unknown eviction signal"));
        } else if let Err(e) = crate::eviction::threshold::parse_value(threshold) {
            errors.push(format!("evictionHard[{signal}]: {e}"));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Error::Config(errors.join("; ")))
    }
}

fn is_non_negative_quantity(amount: &str) -> bool {
    quantity::parse(&Quantity(amount.to_owned())).is_some_and(|v| v >= 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n";

    fn parse_ok(body: &str) -> KubeletConfigFile {
        parse(&format!("{HEADER}{body}")).unwrap_or_else(|e| panic!("{e}"))
    }

    fn parse_err(body: &str) -> String {
        match parse(&format!("{HEADER}{body}")) {
            Ok(_) => panic!("{body:?} was accepted"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn empty_file_gives_v1beta1_defaults() {
        let file = parse_ok("");
        let defaults = KubeletConfig::default();
        assert_eq!(
            file.config.read_only_port, 0,
            "v1beta1 disables the read-only port"
        );
        assert_eq!(file.config.port, 10250);
        assert_eq!(file.config.sync_frequency, defaults.sync_frequency);
        assert_eq!(file.config.eviction_hard, defaults.eviction_hard);
        assert_eq!(file.config.pod_manifest_path, None);
        assert!(file.container_runtime_endpoint.is_none());
        assert!(file.ignored_fields.is_empty());
        assert!(validate(&file.config).is_ok());
        // The v1beta1 defaults of the cluster settings; the main port's authentication
        // and authorization differ from the flag defaults.
        let c = &file.config;
        assert!(c.register_node);
        assert!(c.register_with_taints.is_empty());
        assert_eq!(c.node_status_update_frequency, Duration::from_secs(10));
        assert_eq!(c.node_status_report_frequency, Duration::from_secs(300));
        assert_eq!(c.node_lease_duration_seconds, 40);
        assert_eq!((c.kube_api_qps, c.kube_api_burst), (50, 100));
        assert_eq!(c.max_pods, 110);
        assert_eq!(c.pod_pids_limit, -1);
        assert!(c.cluster_dns.is_empty() && c.cluster_domain.is_empty());
        assert_eq!(c.provider_id, None);
        assert_eq!(c.client_ca_file, None);
        assert!(!c.anonymous_auth, "v1beta1: anonymous requests are refused");
        assert!(
            c.authentication_token_webhook,
            "v1beta1: tokens are reviewed"
        );
        assert_eq!(c.authorization_mode, AuthorizationMode::Webhook);
        assert!(defaults.anonymous_auth && !defaults.authentication_token_webhook);
        assert_eq!(defaults.authorization_mode, AuthorizationMode::AlwaysAllow);
    }

    #[test]
    fn cluster_fields_map_onto_kubelet_config() {
        let file = parse_ok(
            r#"registerNode: false
registerWithTaints:
- {key: dedicated, value: infra, effect: NoSchedule}
- {key: example.com/gpu, effect: NoExecute}
nodeStatusUpdateFrequency: 4s
nodeStatusReportFrequency: 1m
nodeLeaseDurationSeconds: 20
kubeAPIQPS: 0
kubeAPIBurst: 30
maxPods: 16
clusterDNS: [10.96.0.10, "fd00::a", not-an-ip, 010.0.0.1]
clusterDomain: example.local
providerID: kind://docker/kind/node
podPidsLimit: 4096
authentication:
  x509: {clientCAFile: /pki/ca.crt}
  webhook: {enabled: false, cacheTTL: 10s}
  anonymous: {enabled: true}
authorization:
  mode: AlwaysAllow
  webhook: {cacheAuthorizedTTL: 1m, cacheUnauthorizedTTL: 5s}
"#,
        );
        let c = &file.config;
        assert!(file.ignored_fields.is_empty(), "{:?}", file.ignored_fields);
        assert!(!c.register_node);
        assert_eq!(c.register_with_taints.len(), 2);
        assert_eq!(c.register_with_taints[0].key, "dedicated");
        assert_eq!(c.register_with_taints[0].value.as_deref(), Some("infra"));
        assert_eq!(c.register_with_taints[1].effect, "NoExecute");
        assert_eq!(c.register_with_taints[1].value, None);
        assert_eq!(c.node_status_update_frequency, Duration::from_secs(4));
        assert_eq!(c.node_status_report_frequency, Duration::from_secs(60));
        assert_eq!(c.node_lease_duration_seconds, 20);
        assert_eq!(c.kube_api_qps, 0, "an explicit kubeAPIQPS 0 is kept");
        assert_eq!(c.kube_api_burst, 30);
        assert_eq!(c.max_pods, 16);
        let dns: Vec<String> = c.cluster_dns.iter().map(ToString::to_string).collect();
        assert_eq!(
            dns,
            ["10.96.0.10", "fd00::a", "10.0.0.1"],
            "invalid entries are skipped, leading zeros accepted"
        );
        assert_eq!(c.cluster_domain, "example.local");
        assert_eq!(c.provider_id.as_deref(), Some("kind://docker/kind/node"));
        assert_eq!(c.pod_pids_limit, 4096);
        assert_eq!(c.client_ca_file.as_deref(), Some(Path::new("/pki/ca.crt")));
        assert!(c.anonymous_auth);
        assert!(!c.authentication_token_webhook);
        assert_eq!(c.authorization_mode, AuthorizationMode::AlwaysAllow);
        assert!(validate(c).is_ok(), "{:?}", validate(c));
    }

    /// Upstream's defaulting: zero means the default, except for the pointer
    /// `kubeAPIQPS`; the report frequency follows an explicit update frequency.
    #[test]
    fn cluster_field_defaults_follow_upstream() {
        let c = parse_ok("nodeStatusUpdateFrequency: 20s\n").config;
        assert_eq!(c.node_status_update_frequency, Duration::from_secs(20));
        assert_eq!(
            c.node_status_report_frequency,
            Duration::from_secs(20),
            "defaults to the explicit update frequency"
        );
        let c = parse_ok("nodeStatusReportFrequency: 1m\n").config;
        assert_eq!(c.node_status_update_frequency, Duration::from_secs(10));
        assert_eq!(c.node_status_report_frequency, Duration::from_secs(60));
        let c = parse_ok(
            "kubeAPIBurst: 0\nmaxPods: 0\nnodeLeaseDurationSeconds: 0\npodPidsLimit: -7\n\
             authorization: {mode: \"\"}\nauthentication: {webhook: {cacheTTL: 0s}}\n",
        )
        .config;
        assert_eq!(
            (c.kube_api_burst, c.max_pods, c.node_lease_duration_seconds),
            (100, 110, 40)
        );
        assert_eq!(c.pod_pids_limit, -1, "a negative podPidsLimit means -1");
        assert_eq!(c.authorization_mode, AuthorizationMode::Webhook);
        assert!(c.authentication_token_webhook);
    }

    #[test]
    fn bad_cluster_fields_are_refused() {
        let e = parse_err("authorization: {mode: RBAC}\n");
        assert!(
            e.contains("authorization.mode: unknown authorization mode RBAC"),
            "{e}"
        );
        let e = parse_err("authentication: {x509: {clientCAfile: /ca}}\n");
        assert!(
            e.starts_with("authentication:") && e.contains("clientCAfile"),
            "{e}"
        );
        let e = parse_err("authentication: {webhook: {cacheTTL: 2 minutes}}\n");
        assert!(e.contains("invalid duration"), "{e}");
        let e = parse_err("registerWithTaints: [{key: a, effect: NoSchedule, colour: red}]\n");
        assert!(e.starts_with("registerWithTaints:"), "{e}");
        let e = parse_err("maxPods: many\n");
        assert!(e.starts_with("maxPods:"), "{e}");
        let e = parse_err("clusterDNS: 10.96.0.10\n");
        assert!(e.starts_with("clusterDNS:"), "a list is required: {e}");
    }

    /// Upstream's `ValidateKubeletConfiguration` rules for the cluster settings.
    #[test]
    fn cluster_settings_are_validated() {
        let file = parse_ok(
            r#"nodeLeaseDurationSeconds: -1
kubeAPIQPS: -1
kubeAPIBurst: -2
maxPods: -3
registerWithTaints:
- {key: "bad key", effect: NoSchedule}
- {key: ok, value: "-bad", effect: NoSchedule}
- {key: ok, effect: Sometimes}
- {key: fine, effect: NoSchedule, timeAdded: "2024-01-01T00:00:00Z"}
- {key: no-effect}
"#,
        );
        let e = validate(&file.config)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        for needle in [
            "nodeLeaseDurationSeconds: must be greater than 0",
            "kubeAPIQPS (--kube-api-qps): -1 must not be a negative number",
            "kubeAPIBurst (--kube-api-burst): -2 must not be a negative number",
            "maxPods (--max-pods): -3 must not be a negative number",
            "registerWithTaints[0]: invalid taint bad key=:NoSchedule: invalid taint key",
            "registerWithTaints[1]: invalid taint ok=-bad:NoSchedule: invalid taint value",
            "registerWithTaints[2]: invalid taint ok=:Sometimes: invalid taint effect: Sometimes",
            "registerWithTaints[3]: taint.TimeAdded is not nil",
        ] {
            assert!(e.contains(needle), "missing {needle:?} in {e}");
        }
        assert!(
            !e.contains("registerWithTaints[4]"),
            "an empty effect is valid: {e}"
        );
        let c = KubeletConfig {
            node_status_update_frequency: Duration::ZERO,
            ..KubeletConfig::default()
        };
        let e = validate(&c)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            e.contains("nodeStatusUpdateFrequency: must be greater than zero"),
            "{e}"
        );
    }

    #[test]
    fn register_with_taints_flag() {
        let taints = parse_register_with_taints(
            "dedicated=infra:NoSchedule,example.com/gpu:NoExecute,soft=x:PreferNoSchedule",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let spelled: Vec<String> = taints
            .iter()
            .map(|t| {
                format!(
                    "{}={}:{}",
                    t.key,
                    t.value.as_deref().unwrap_or(""),
                    t.effect
                )
            })
            .collect();
        assert_eq!(
            spelled,
            [
                "dedicated=infra:NoSchedule",
                "example.com/gpu=:NoExecute",
                "soft=x:PreferNoSchedule"
            ]
        );
        assert_eq!(taints[1].value, None);
        assert!(parse_register_with_taints("").is_ok_and(|t| t.is_empty()));
        // A removal (kubectl's `key-`) is checked, then dropped, as upstream.
        let taints = parse_register_with_taints("a:NoSchedule,b:NoSchedule-")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(taints.len(), 1);
        let err = |s: &str| match parse_register_with_taints(s) {
            Ok(t) => panic!("{s:?} gave {t:?}"),
            Err(e) => e.to_string(),
        };
        assert_eq!(err("key"), "invalid taint spec: key");
        assert_eq!(
            err("key=v:Sometimes"),
            "invalid taint effect: Sometimes, unsupported taint effect"
        );
        assert_eq!(
            err("a=b=c:NoSchedule"),
            "invalid taint spec: a=b=c:NoSchedule"
        );
        assert_eq!(err("a:b:NoSchedule"), "invalid taint spec: a:b:NoSchedule");
        assert!(
            err("a=-x:NoSchedule")
                .starts_with("invalid taint spec: a=-x:NoSchedule, a valid label must"),
            "{}",
            err("a=-x:NoSchedule")
        );
        assert!(
            err("bad key:NoSchedule")
                .starts_with("invalid taint spec: bad key:NoSchedule, name part")
        );
        assert!(err("a:NoSchedule,").starts_with("invalid taint spec: , "));
        assert!(err("bad key-").starts_with("invalid taint spec: bad key, "));
        assert_eq!(
            err("k=1:NoSchedule,k=2:NoSchedule"),
            "duplicated taints with the same key and effect: {k 2 NoSchedule <nil>}"
        );
        assert!(parse_register_with_taints("k=1:NoSchedule,k=2:NoExecute").is_ok());
    }

    #[test]
    fn node_labels_flag() {
        let labels = parse_node_labels(&[
            "a=1, b = 2 ,flag".to_owned(),
            "a=3,,node.kubernetes.io/pool=x".to_owned(),
        ]);
        let pairs: Vec<(&str, &str)> = labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("a", "3"),
                ("b", "2"),
                ("flag", ""),
                ("node.kubernetes.io/pool", "x")
            ]
        );
        assert!(validate_node_labels(&labels).is_ok());
        for allowed in [
            "kubernetes.io/hostname",
            "topology.kubernetes.io/zone",
            "kubelet.kubernetes.io/x",
            "a.node.kubernetes.io/x",
            "beta.kubernetes.io/instance-type",
            "example.com/role",
            "kubernetes.io",
        ] {
            let labels = BTreeMap::from([(allowed.to_owned(), "v".to_owned())]);
            assert!(validate_node_labels(&labels).is_ok(), "{allowed}");
        }
        assert!(!is_kubelet_label("node-role.kubernetes.io/worker"));
        assert!(!is_kubelet_label("xnode.kubernetes.io/a"));
        assert!(is_kubelet_label("sub.kubelet.kubernetes.io/a"));
        let labels = BTreeMap::from([
            ("node-role.kubernetes.io/worker".to_owned(), String::new()),
            ("app.k8s.io/name".to_owned(), "x".to_owned()),
            ("example.com/ok".to_owned(), "x".to_owned()),
        ]);
        let e = validate_node_labels(&labels)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            e.starts_with(
                "unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: \
                 [app.k8s.io/name node-role.kubernetes.io/worker]\n--node-labels in the \
                 'kubernetes.io' namespace must begin with an allowed prefix \
                 (kubelet.kubernetes.io, node.kubernetes.io) or be in the specifically allowed \
                 set (beta.kubernetes.io/arch, "
            ),
            "{e}"
        );
        let labels = BTreeMap::from([
            ("bad key".to_owned(), "ok".to_owned()),
            ("good".to_owned(), "-bad".to_owned()),
        ]);
        let e = validate_node_labels(&labels)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            e.starts_with("invalid node labels: '-bad' - a valid label must"),
            "{e}"
        );
        assert!(e.contains("; 'bad key' - name part must consist of"), "{e}");
    }

    #[test]
    fn authorization_modes_and_cluster_dns() {
        assert_eq!(
            parse_authorization_mode("AlwaysAllow").ok(),
            Some(AuthorizationMode::AlwaysAllow)
        );
        assert_eq!(
            parse_authorization_mode("Webhook").ok(),
            Some(AuthorizationMode::Webhook)
        );
        let e = |m: &str| parse_authorization_mode(m).err().map(|e| e.to_string());
        assert_eq!(e("").as_deref(), Some("no authorization mode specified"));
        assert_eq!(
            e("webhook").as_deref(),
            Some("unknown authorization mode webhook")
        );
        let dns = parse_cluster_dns(&[
            "10.0.0.10".into(),
            " 10.0.0.11".into(),
            "1.2.3".into(),
            "256.1.1.1".into(),
            "::1".into(),
            "001.002.003.004".into(),
        ]);
        let dns: Vec<String> = dns.iter().map(ToString::to_string).collect();
        assert_eq!(dns, ["10.0.0.10", "::1", "1.2.3.4"]);
    }

    #[test]
    fn implemented_fields_map_onto_kubelet_config() {
        let file = parse_ok(
            r#"staticPodPath: /etc/kubernetes/manifests
staticPodURL: http://10.0.0.1/pods.json
staticPodURLHeader: {Authorization: ["Bearer x"], X-A: [a, b]}
podLogsDir: /logs
syncFrequency: 1m30s
fileCheckFrequency: 5s
httpCheckFrequency: 500ms
address: 0.0.0.0
port: 11250
readOnlyPort: 10255
tlsCertFile: /pki/k.crt
tlsPrivateKeyFile: /pki/k.key
cgroupRoot: /sk
cgroupDriver: cgroupfs
cgroupsPerQOS: false
systemReserved: {cpu: 100m, memory: 1Gi}
kubeReserved: {memory: 512Mi}
enforceNodeAllocatable: [none]
evictionHard: {memory.available: 200Mi}
evictionPressureTransitionPeriod: 1m
imageGCHighThresholdPercent: 90
imageGCLowThresholdPercent: 70
imageMinimumGCAge: 1h
serializeImagePulls: false
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
containerLogMaxSize: 50Mi
containerLogMaxFiles: 3
containerLogMaxWorkers: 2
containerLogMonitorInterval: 5s
"#,
        );
        let c = &file.config;
        assert_eq!(
            c.container_log,
            crate::logs::LogRotatePolicy {
                max_size: 50 << 20,
                max_files: 3,
                max_workers: 2,
                monitor_interval: Duration::from_secs(5),
            }
        );
        assert_eq!(
            c.pod_manifest_path.as_deref(),
            Some(Path::new("/etc/kubernetes/manifests"))
        );
        assert_eq!(c.manifest_url.as_deref(), Some("http://10.0.0.1/pods.json"));
        assert_eq!(c.manifest_url_header["X-A"], vec!["a", "b"]);
        assert_eq!(c.pod_logs_dir, Path::new("/logs"));
        assert_eq!(c.sync_frequency, Duration::from_secs(90));
        assert_eq!(c.file_check_frequency, Duration::from_secs(5));
        assert_eq!(c.http_check_frequency, Duration::from_millis(500));
        assert_eq!(c.address.to_string(), "0.0.0.0");
        assert_eq!((c.port, c.read_only_port), (11250, 10255));
        assert_eq!(c.tls_cert_file.as_deref(), Some(Path::new("/pki/k.crt")));
        assert_eq!(
            c.tls_private_key_file.as_deref(),
            Some(Path::new("/pki/k.key"))
        );
        assert_eq!(c.cgroup_root, Path::new("/sk"));
        assert!(!c.cgroups_per_qos);
        assert_eq!(c.system_reserved["memory"], "1Gi");
        assert_eq!(c.kube_reserved.len(), 1);
        assert_eq!(c.enforce_node_allocatable, vec!["none"]);
        assert_eq!(c.eviction_hard.len(), 1, "a map replaces the defaults");
        assert_eq!(
            c.eviction_pressure_transition_period,
            Duration::from_secs(60)
        );
        assert_eq!(
            (
                c.image_gc_high_threshold_percent,
                c.image_gc_low_threshold_percent
            ),
            (90, 70)
        );
        assert_eq!(c.image_minimum_gc_age, Duration::from_secs(3600));
        assert!(!c.serialize_image_pulls);
        assert_eq!(
            file.container_runtime_endpoint.as_deref(),
            Some("unix:///run/containerd/containerd.sock")
        );
        assert!(validate(c).is_ok(), "{:?}", validate(c));
    }

    /// Upstream's rules for the container log settings.
    #[test]
    fn container_log_settings_are_checked() {
        let invalid = |body: &str| {
            let file = parse_ok(body);
            validate(&file.config).unwrap_err().to_string()
        };
        assert!(
            invalid("containerLogMaxFiles: 1\n")
                .contains("containerLogMaxFiles: must be greater than 1")
        );
        assert!(invalid("containerLogMaxWorkers: 0\n").contains("containerLogMaxWorkers"));
        assert!(
            invalid("containerLogMonitorInterval: 1s\n").contains("greater than or equal to 3s")
        );
        let bad_size = parse_err("containerLogMaxSize: ten\n");
        assert!(
            bad_size.contains("containerLogMaxSize: invalid quantity"),
            "{bad_size}"
        );
        assert_eq!(parse_log_max_size("10Mi"), Ok(10 << 20));
        assert_eq!(parse_log_max_size("1k"), Ok(1000));
        assert!(parse_log_max_size("0").is_err());
    }

    /// What `kubeadm init` writes (v1.30, cgroupDriver switched to cgroupfs).
    #[test]
    fn a_kubeadm_file_loads() {
        let file = parse_ok(
            r#"authentication:
  anonymous:
    enabled: false
  webhook:
    cacheTTL: 0s
    enabled: true
  x509:
    clientCAFile: /etc/kubernetes/pki/ca.crt
authorization:
  mode: Webhook
  webhook:
    cacheAuthorizedTTL: 0s
    cacheUnauthorizedTTL: 0s
cgroupDriver: cgroupfs
clusterDNS:
- 10.96.0.10
clusterDomain: cluster.local
containerRuntimeEndpoint: ""
cpuManagerReconcilePeriod: 0s
evictionPressureTransitionPeriod: 0s
fileCheckFrequency: 0s
healthzBindAddress: 127.0.0.1
healthzPort: 10248
httpCheckFrequency: 0s
imageMaximumGCAge: 0s
imageMinimumGCAge: 0s
logging:
  flushFrequency: 0
  options:
    json:
      infoBufferSize: "0"
  verbosity: 0
memorySwap: {}
nodeStatusReportFrequency: 0s
nodeStatusUpdateFrequency: 0s
resolvConf: /run/systemd/resolve/resolv.conf
rotateCertificates: true
runtimeRequestTimeout: 0s
shutdownGracePeriod: 0s
shutdownGracePeriodCriticalPods: 0s
staticPodPath: /etc/kubernetes/manifests
streamingConnectionIdleTimeout: 0s
syncFrequency: 0s
volumeStatsAggPeriod: 0s
"#,
        );
        assert!(!file.ignored_fields.contains(&"authentication".to_owned()));
        assert!(!file.ignored_fields.contains(&"clusterDNS".to_owned()));
        assert!(file.ignored_fields.contains(&"resolvConf".to_owned()));
        assert!(file.container_runtime_endpoint.is_none());
        let c = &file.config;
        assert!(!c.anonymous_auth);
        assert!(c.authentication_token_webhook);
        assert_eq!(c.authorization_mode, AuthorizationMode::Webhook);
        assert_eq!(
            c.client_ca_file.as_deref(),
            Some(Path::new("/etc/kubernetes/pki/ca.crt"))
        );
        assert_eq!(c.cluster_dns, vec![std::net::IpAddr::from([10, 96, 0, 10])]);
        assert_eq!(c.cluster_domain, "cluster.local");
        // `0s` for both frequencies: the defaults, 10 s and 5 min.
        assert_eq!(c.node_status_update_frequency, Duration::from_secs(10));
        assert_eq!(c.node_status_report_frequency, Duration::from_secs(300));
        // kubeadm writes 0s for "use the default"; upstream's defaulting turns zero into
        // the default before validation, so validation rejects it here only if kept.
        assert_eq!(file.config.sync_frequency, Duration::from_secs(60));
        assert!(
            validate(&file.config).is_ok(),
            "{:?}",
            validate(&file.config)
        );
    }

    #[test]
    fn unknown_and_rejected_fields_are_errors() {
        let e = parse_err("staticPodPat: /x\n");
        assert!(e.contains("unknown field `staticPodPat`"), "{e}");
        let e = parse_err("runOnce: true\n");
        assert!(e.starts_with("runOnce:"), "{e}");
        let e = parse_err("authentication: {}\nbogus: 1\n");
        assert!(e.contains("bogus"), "{e}");
    }

    #[test]
    fn wrong_api_version_or_kind() {
        let e = parse("apiVersion: v1\nkind: KubeletConfiguration\n")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.starts_with("apiVersion:") && e.contains("v1beta1"), "{e}");
        let e = parse("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: Pod\n")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.starts_with("kind:"), "{e}");
        let e = parse("kind: KubeletConfiguration\n")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("apiVersion: Required"), "{e}");
        assert!(parse("- a\n").is_err());
        assert!(parse("port: [").is_err());
    }

    #[test]
    fn bad_values_name_their_field() {
        let e = parse_err("syncFrequency: 10 seconds\n");
        assert!(
            e.contains("syncFrequency") && e.contains("invalid duration"),
            "{e}"
        );
        let e = parse_err("port: http\n");
        assert!(e.contains("port"), "{e}");
        let e = parse_err("readOnlyPort: 70000\n");
        assert!(e.contains("readOnlyPort: 70000"), "{e}");
        let e = parse_err("address: localhost\n");
        assert!(e.contains("address"), "{e}");
        let e = parse_err("cgroupsPerQOS: maybe\n");
        assert!(e.contains("cgroupsPerQOS"), "{e}");
    }

    #[test]
    fn validation_reports_every_problem_by_field() {
        let file = parse_ok(
            r#"cgroupDriver: systemd
imageGCHighThresholdPercent: 70
imageGCLowThresholdPercent: 80
evictionHard: {memory.available: 1Gb, nodefs.available: "110%", disk.free: 1Gi}
systemReserved: {memory: lots, gpu: "1"}
enforceNodeAllocatable: [pods, none]
"#,
        );
        let e = validate(&file.config)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        for needle in [
            "cgroupDriver: unsupported value \"systemd\"",
            "imageGCLowThresholdPercent: 80 must be less than imageGCHighThresholdPercent (70)",
            "evictionHard[memory.available]: invalid quantity",
            "evictionHard[nodefs.available]: percentage \"110%\" must be between",
            "evictionHard[disk.free]: unknown eviction signal",
            "systemReserved[memory]: invalid quantity",
            "systemReserved[gpu]: unsupported resource",
            "enforceNodeAllocatable: \"none\" cannot be combined",
        ] {
            assert!(e.contains(needle), "missing {needle:?} in {e}");
        }
        let c = KubeletConfig {
            image_gc_high_threshold_percent: 101,
            sync_frequency: Duration::ZERO,
            manifest_url: Some("ftp://x".into()),
            ..KubeletConfig::default()
        };
        let e = validate(&c)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            e.contains("imageGCHighThresholdPercent: 101 must be between 0 and 100"),
            "{e}"
        );
        assert!(
            e.contains("syncFrequency: must be greater than zero"),
            "{e}"
        );
        assert!(e.contains("staticPodURL"), "{e}");
    }

    #[test]
    fn go_durations() {
        let ok = |s: &str| parse_duration(s).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ok("0"), Duration::ZERO);
        assert_eq!(ok("20s"), Duration::from_secs(20));
        assert_eq!(ok("1m0s"), Duration::from_secs(60));
        assert_eq!(ok("1h2m3s"), Duration::from_secs(3723));
        assert_eq!(ok("1.5h"), Duration::from_secs(5400));
        assert_eq!(ok("300ms"), Duration::from_millis(300));
        assert_eq!(ok("2us"), Duration::from_micros(2));
        assert_eq!(ok("+5s"), Duration::from_secs(5));
        for bad in ["", "5", "s", "1x", "1m 2s", "-1s", "1..2s", "."] {
            assert!(parse_duration(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn flag_maps() {
        let m = parse_map_string_string("cpu=200m, memory=500Mi").unwrap_or_default();
        assert_eq!(m["cpu"], "200m");
        assert_eq!(m["memory"], "500Mi");
        assert!(parse_map_string_string("").is_ok_and(|m| m.is_empty()));
        assert!(parse_map_string_string("cpu").is_err());
        let t = parse_eviction_thresholds("memory.available<100Mi, nodefs.available<10%")
            .unwrap_or_default();
        assert_eq!(t["memory.available"], "100Mi");
        assert_eq!(t["nodefs.available"], "10%");
        assert!(parse_eviction_thresholds("").is_ok_and(|t| t.is_empty()));
        assert!(parse_eviction_thresholds("memory.available=1Gi").is_err());
        let h = parse_url_headers(&["a:hello,b:again".into(), "b:beautiful".into()])
            .unwrap_or_default();
        assert_eq!(h["a"], vec!["hello"]);
        assert_eq!(h["b"], vec!["again", "beautiful"]);
        assert!(parse_url_headers(&["novalue".into()]).is_err());
    }
}
