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
//! Also home of the parsers of the matching flag formats: Go durations
//! ([`parse_duration`]), `key=value` maps ([`parse_map_string_string`]), eviction
//! thresholds `signal<quantity` ([`parse_eviction_thresholds`]) and manifest URL headers
//! ([`parse_url_headers`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::{Deserialize, Deserializer};

use crate::KubeletConfig;
use skiff_api::quantity;

/// The `apiVersion` a file must have.
pub const API_VERSION: &str = "kubelet.config.k8s.io/v1beta1";
/// The `kind` a file must have.
pub const KIND: &str = "KubeletConfiguration";

/// Upstream fields Skiff accepts without implementing them: a file written for the
/// upstream kubelet (kubeadm's, a distribution's) loads, and each of these is reported
/// at info level.
pub const IGNORED_FIELDS: &[&str] = &[
    "allowedUnsafeSysctls",
    "authentication",
    "authorization",
    "clusterDNS",
    "clusterDomain",
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
    "kubeAPIBurst",
    "kubeAPIQPS",
    "kubeReservedCgroup",
    "kubeletCgroups",
    "localStorageCapacityIsolation",
    "logging",
    "makeIPTablesUtilChains",
    "maxOpenFiles",
    "maxParallelImagePulls",
    "maxPods",
    "memoryManagerPolicy",
    "memorySwap",
    "memoryThrottlingFactor",
    "mergeDefaultEvictionSettings",
    "nodeLeaseDurationSeconds",
    "nodeStatusMaxImages",
    "nodeStatusReportFrequency",
    "nodeStatusUpdateFrequency",
    "oomScoreAdj",
    "podCIDR",
    "podPidsLimit",
    "podsPerCore",
    "preloadedImagesVerificationAllowlist",
    "protectKernelDefaults",
    "providerID",
    "qosReserved",
    "registerNode",
    "registerWithTaints",
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
/// [`KubeletConfig::default`] except `readOnlyPort`, which v1beta1 defaults to 0
/// (disabled). As upstream's defaulting, a zero duration or `port: 0` means the default.
/// Maps (`evictionHard`, `systemReserved`, ...) replace their defaults
/// entirely, as upstream.
///
/// Errors (`field: message`): not a mapping, wrong `apiVersion` or `kind`, an unknown or
/// rejected field, a value of the wrong type, a bad duration, quantity, percentage,
/// address or port. Cross-field rules are left to [`validate`], after flags.
pub fn parse(content: &str) -> Result<KubeletConfigFile, String> {
    let document: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(content).map_err(|e| format!("not valid YAML: {e}"))?;
    let serde_yaml_ng::Value::Mapping(mut fields) = document else {
        return Err("the document must be a KubeletConfiguration mapping".to_owned());
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
        return Err(problems.join("; "));
    }
    let file: FileFields = serde_yaml_ng::from_value(fields.clone().into())
        .map_err(|whole| field_error(&fields, &whole))?;
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
}

impl FileFields {
    /// The file's values over the v1beta1 defaults, with per-field value checks.
    fn resolve(self) -> Result<(KubeletConfig, Option<String>), String> {
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
                .map_err(|_| format!("address: invalid IP address {address:?}"))?;
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
            c.container_log.max_size =
                parse_log_max_size(&size.0).map_err(|e| format!("containerLogMaxSize: {e}"))?;
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
        let endpoint = self.container_runtime_endpoint.filter(|e| !e.is_empty());
        Ok((c, endpoint))
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

fn expect_field(field: &str, value: Option<&str>, expected: &str) -> Result<(), String> {
    match value {
        Some(v) if v == expected => Ok(()),
        Some(v) => Err(format!("{field}: must be {expected:?}, not {v:?}")),
        None => Err(format!("{field}: Required value (must be {expected:?})")),
    }
}

fn port_number(field: &str, port: i64) -> Result<u16, String> {
    u16::try_from(port).map_err(|_| format!("{field}: {port} must be between 0 and 65535"))
}

/// `containerLogMaxSize` (and `--container-log-max-size`): a quantity of bytes, such as
/// `10Mi` or `50M`, greater than zero.
pub fn parse_log_max_size(text: &str) -> Result<u64, String> {
    let bytes = quantity::parse(&Quantity(text.to_owned()))
        .ok_or_else(|| format!("invalid quantity {text:?} (examples: 10Mi, 50M)"))?;
    if bytes < 1.0 {
        return Err(format!("{text:?} must be greater than zero"));
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
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let invalid = || format!("invalid duration {s:?} (examples: 20s, 1m30s, 500ms)");
    let text = s.trim().strip_prefix('+').unwrap_or(s.trim());
    if text.starts_with('-') {
        return Err(format!("invalid duration {s:?}: must not be negative"));
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
pub fn parse_map_string_string(s: &str) -> Result<BTreeMap<String, String>, String> {
    parse_pairs(s, '=')
}

/// Parses eviction thresholds `signal<quantity` separated by commas (upstream
/// `LangleSeparatedMapStringString`, e.g. `--eviction-hard
/// memory.available<100Mi,nodefs.available<10%`).
pub fn parse_eviction_thresholds(s: &str) -> Result<BTreeMap<String, String>, String> {
    parse_pairs(s, '<')
}

fn parse_pairs(s: &str, separator: char) -> Result<BTreeMap<String, String>, String> {
    let mut map = BTreeMap::new();
    for pair in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = pair
            .split_once(separator)
            .ok_or_else(|| format!("malformed pair {pair:?}, expected key{separator}value"))?;
        let key = key.trim();
        if key.is_empty() {
            return Err(format!("malformed pair {pair:?}: empty key"));
        }
        map.insert(key.to_owned(), value.trim().to_owned());
    }
    Ok(map)
}

/// Parses `--manifest-url-header` values: each `name:value` pairs separated by commas,
/// repeated flags accumulate (upstream `ColonSeparatedMultimapStringString`), e.g.
/// `a:hello,b:again` then `b:beautiful` gives `a: [hello]`, `b: [again, beautiful]`.
pub fn parse_url_headers(values: &[String]) -> Result<BTreeMap<String, Vec<String>>, String> {
    let mut headers: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for value in values {
        for pair in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, v) = pair
                .split_once(':')
                .ok_or_else(|| format!("malformed header {pair:?}, expected name:value"))?;
            let name = name.trim();
            if name.is_empty() {
                return Err(format!("malformed header {pair:?}: empty name"));
            }
            headers
                .entry(name.to_owned())
                .or_default()
                .push(v.trim().to_owned());
        }
    }
    Ok(headers)
}

/// Checks a resolved configuration (file and flags), as upstream's
/// `ValidateKubeletConfiguration` plus Skiff's limits. The error lists every problem as
/// `field: message` (upstream field names), joined by `; `.
pub fn validate(c: &KubeletConfig) -> Result<(), String> {
    let mut errors = Vec::new();
    for (field, value) in [
        ("syncFrequency", c.sync_frequency),
        ("fileCheckFrequency", c.file_check_frequency),
        ("httpCheckFrequency", c.http_check_frequency),
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
        Err(errors.join("; "))
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
            Err(e) => e,
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
            validate(&file.config).unwrap_err()
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
        assert!(file.ignored_fields.contains(&"authentication".to_owned()));
        assert!(file.ignored_fields.contains(&"resolvConf".to_owned()));
        assert!(file.container_runtime_endpoint.is_none());
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
            .unwrap_or_default();
        assert!(e.starts_with("apiVersion:") && e.contains("v1beta1"), "{e}");
        let e = parse("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: Pod\n")
            .err()
            .unwrap_or_default();
        assert!(e.starts_with("kind:"), "{e}");
        let e = parse("kind: KubeletConfiguration\n")
            .err()
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
        let e = validate(&file.config).err().unwrap_or_default();
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
        let e = validate(&c).err().unwrap_or_default();
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
