//! Upstream 1.33's defaults of KubeSchedulerConfiguration v1
//! (`pkg/scheduler/apis/config/v1/defaults.go` `SetDefaults_KubeSchedulerConfiguration`,
//! `default_plugins.go` `getDefaultPlugins` and `mergePlugins`, and the
//! `SetDefaults_*Args` of the in-tree plugin args).

use std::collections::BTreeSet;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::types::{
    API_VERSION, DEFAULT_SCHEDULER_NAME, DefaultPreemptionArgs, GoDuration, InterPodAffinityArgs,
    KIND, KubeSchedulerConfiguration, KubeSchedulerProfile, NodeAffinityArgs,
    NodeResourcesBalancedAllocationArgs, NodeResourcesFitArgs, Plugin, PluginConfig, PluginSet,
    Plugins, PodTopologySpreadArgs, ResourceSpec, ScoringStrategy, VolumeBindingArgs,
};

/// Default `parallelism`.
pub const DEFAULT_PARALLELISM: i32 = 16;
/// Default `percentageOfNodesToScore` (0: adaptive).
pub const DEFAULT_PERCENTAGE_OF_NODES_TO_SCORE: i32 = 0;
/// Default `podInitialBackoffSeconds`.
pub const DEFAULT_POD_INITIAL_BACKOFF_SECONDS: i64 = 1;
/// Default `podMaxBackoffSeconds`.
pub const DEFAULT_POD_MAX_BACKOFF_SECONDS: i64 = 10;
/// Default leader election `leaseDuration`.
pub const DEFAULT_LEASE_DURATION: GoDuration = GoDuration::from_secs(15);
/// Default leader election `renewDeadline`.
pub const DEFAULT_RENEW_DEADLINE: GoDuration = GoDuration::from_secs(10);
/// Default leader election `retryPeriod`.
pub const DEFAULT_RETRY_PERIOD: GoDuration = GoDuration::from_secs(2);
/// Default leader election `resourceLock`.
pub const DEFAULT_RESOURCE_LOCK: &str = "leases";
/// Default leader election `resourceName`.
pub const DEFAULT_RESOURCE_NAME: &str = "kube-scheduler";
/// Default leader election `resourceNamespace`.
pub const DEFAULT_RESOURCE_NAMESPACE: &str = "kube-system";
/// Default client `contentType`.
pub const DEFAULT_CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";
/// Default client `qps`.
pub const DEFAULT_QPS: f32 = 50.0;
/// Default client `burst`.
pub const DEFAULT_BURST: i32 = 100;

/// The in-tree plugins that take args (upstream: the kinds registered as `<Name>Args`
/// in the v1 scheme, DynamicResources aside as its plugin is off by default), sorted.
pub const PLUGINS_WITH_ARGS: [&str; 7] = [
    "DefaultPreemption",
    "InterPodAffinity",
    "NodeAffinity",
    "NodeResourcesBalancedAllocation",
    "NodeResourcesFit",
    "PodTopologySpread",
    "VolumeBinding",
];

/// The default plugins of v1 (upstream 1.33 `getDefaultPlugins`, DynamicResources being
/// behind its feature gate, off): every one enabled through `multiPoint`, in this
/// order, with these Score weights.
pub fn default_plugins() -> Plugins {
    let enabled = vec![
        Plugin::named("SchedulingGates"),
        Plugin::named("PrioritySort"),
        Plugin::named("NodeUnschedulable"),
        Plugin::named("NodeName"),
        Plugin::weighted("TaintToleration", 3),
        Plugin::weighted("NodeAffinity", 2),
        Plugin::named("NodePorts"),
        Plugin::weighted("NodeResourcesFit", 1),
        Plugin::named("VolumeRestrictions"),
        Plugin::named("NodeVolumeLimits"),
        Plugin::named("VolumeBinding"),
        Plugin::named("VolumeZone"),
        Plugin::weighted("PodTopologySpread", 2),
        Plugin::weighted("InterPodAffinity", 2),
        Plugin::named("DefaultPreemption"),
        Plugin::weighted("NodeResourcesBalancedAllocation", 1),
        Plugin::weighted("ImageLocality", 1),
        Plugin::named("DefaultBinder"),
    ];
    Plugins {
        multi_point: PluginSet {
            enabled,
            disabled: Vec::new(),
        },
        ..Plugins::default()
    }
}

/// Merges a profile's `plugins` into the defaults, point by point (upstream
/// `mergePlugins`); the defaults alone when the profile has none.
pub fn merge_plugins(defaults: Plugins, custom: Option<&Plugins>) -> Plugins {
    let Some(custom) = custom else {
        return defaults;
    };
    Plugins {
        pre_enqueue: merge_plugin_set(&defaults.pre_enqueue, &custom.pre_enqueue),
        queue_sort: merge_plugin_set(&defaults.queue_sort, &custom.queue_sort),
        pre_filter: merge_plugin_set(&defaults.pre_filter, &custom.pre_filter),
        filter: merge_plugin_set(&defaults.filter, &custom.filter),
        post_filter: merge_plugin_set(&defaults.post_filter, &custom.post_filter),
        pre_score: merge_plugin_set(&defaults.pre_score, &custom.pre_score),
        score: merge_plugin_set(&defaults.score, &custom.score),
        reserve: merge_plugin_set(&defaults.reserve, &custom.reserve),
        permit: merge_plugin_set(&defaults.permit, &custom.permit),
        pre_bind: merge_plugin_set(&defaults.pre_bind, &custom.pre_bind),
        bind: merge_plugin_set(&defaults.bind, &custom.bind),
        post_bind: merge_plugin_set(&defaults.post_bind, &custom.post_bind),
        multi_point: merge_plugin_set(&defaults.multi_point, &custom.multi_point),
    }
}

/// One point's merge (upstream `mergePluginSet`): the default plugins not disabled (none
/// when `*` is), each replaced in place by the custom entry of the same name, then the
/// other custom plugins in their order. The disabled list keeps the custom and default
/// disabled names, for the `multiPoint` expansion to honour.
pub fn merge_plugin_set(defaults: &PluginSet, custom: &PluginSet) -> PluginSet {
    let disabled: Vec<Plugin> = custom
        .disabled
        .iter()
        .chain(&defaults.disabled)
        .map(|p| Plugin::named(&p.name))
        .collect();
    let is_disabled = |name: &str| disabled.iter().any(|d| d.name == name);
    let mut replaced = BTreeSet::new();
    let mut enabled = Vec::new();
    if !is_disabled("*") {
        for default in &defaults.enabled {
            if is_disabled(&default.name) {
                continue;
            }
            // The last custom entry of a name is the one upstream's map keeps.
            match custom
                .enabled
                .iter()
                .enumerate()
                .rev()
                .find(|(_, c)| c.name == default.name)
            {
                Some((index, c)) => {
                    replaced.insert(index);
                    enabled.push(c.clone());
                }
                None => enabled.push(default.clone()),
            }
        }
    }
    enabled.extend(
        custom
            .enabled
            .iter()
            .enumerate()
            .filter(|(index, _)| !replaced.contains(index))
            .map(|(_, p)| p.clone()),
    );
    PluginSet { enabled, disabled }
}

/// Applies upstream's defaults in place (`SetDefaults_KubeSchedulerConfiguration`): one
/// profile when there is none, named `default-scheduler` when it is the only one and
/// unnamed; every profile's plugins merged with [`default_plugins`] and its plugin args
/// defaulted, with default args added for the enabled in-tree plugins that have none;
/// the scalar defaults (see the `DEFAULT_*` constants). Args that do not decode are left
/// as they are ([`super::decode`] reports them).
pub fn set_defaults(cfg: &mut KubeSchedulerConfiguration) {
    if cfg.api_version.is_empty() {
        cfg.api_version = API_VERSION.into();
    }
    if cfg.kind.is_empty() {
        cfg.kind = KIND.into();
    }
    cfg.parallelism.get_or_insert(DEFAULT_PARALLELISM);
    if cfg.profiles.is_empty() {
        cfg.profiles.push(KubeSchedulerProfile::default());
    }
    if let [only] = cfg.profiles.as_mut_slice() {
        only.scheduler_name
            .get_or_insert_with(|| DEFAULT_SCHEDULER_NAME.into());
    }
    for profile in &mut cfg.profiles {
        set_profile_defaults(profile);
    }
    cfg.percentage_of_nodes_to_score
        .get_or_insert(DEFAULT_PERCENTAGE_OF_NODES_TO_SCORE);

    let le = &mut cfg.leader_election;
    if le.resource_lock.is_empty() {
        le.resource_lock = DEFAULT_RESOURCE_LOCK.into();
    }
    if le.resource_namespace.is_empty() {
        le.resource_namespace = DEFAULT_RESOURCE_NAMESPACE.into();
    }
    if le.resource_name.is_empty() {
        le.resource_name = DEFAULT_RESOURCE_NAME.into();
    }
    // component-base's RecommendedDefaultLeaderElectionConfiguration: zero durations
    // take the defaults.
    if le.lease_duration.nanos() == 0 {
        le.lease_duration = DEFAULT_LEASE_DURATION;
    }
    if le.renew_deadline.nanos() == 0 {
        le.renew_deadline = DEFAULT_RENEW_DEADLINE;
    }
    if le.retry_period.nanos() == 0 {
        le.retry_period = DEFAULT_RETRY_PERIOD;
    }
    le.leader_elect.get_or_insert(true);

    let cc = &mut cfg.client_connection;
    if cc.content_type.is_empty() {
        cc.content_type = DEFAULT_CONTENT_TYPE.into();
    }
    if cc.qps == 0.0 {
        cc.qps = DEFAULT_QPS;
    }
    if cc.burst == 0 {
        cc.burst = DEFAULT_BURST;
    }

    cfg.pod_initial_backoff_seconds
        .get_or_insert(DEFAULT_POD_INITIAL_BACKOFF_SECONDS);
    cfg.pod_max_backoff_seconds
        .get_or_insert(DEFAULT_POD_MAX_BACKOFF_SECONDS);
    let profiling = *cfg.enable_profiling.get_or_insert(true);
    if profiling {
        cfg.enable_contention_profiling.get_or_insert(true);
    }
}

/// A profile's defaults (upstream `setDefaults_KubeSchedulerProfile`).
fn set_profile_defaults(profile: &mut KubeSchedulerProfile) {
    let plugins = merge_plugins(default_plugins(), profile.plugins.as_ref());
    let mut configured = BTreeSet::new();
    for pc in &mut profile.plugin_config {
        configured.insert(pc.name.clone());
        if let Ok(Some(args)) = defaulted_args(&pc.name, &pc.args) {
            pc.args = args;
        }
    }
    for name in plugin_names(&plugins) {
        if configured.contains(name) {
            continue;
        }
        if let Ok(Some(args)) = defaulted_args(name, &Value::Null) {
            profile.plugin_config.push(PluginConfig {
                name: name.to_owned(),
                args,
            });
        }
    }
    profile.plugins = Some(plugins);
}

/// Every plugin enabled at some point or through `multiPoint`, sorted and once each
/// (upstream `pluginsNames`).
pub fn plugin_names(plugins: &Plugins) -> BTreeSet<&str> {
    [
        &plugins.multi_point,
        &plugins.pre_filter,
        &plugins.filter,
        &plugins.post_filter,
        &plugins.reserve,
        &plugins.pre_score,
        &plugins.score,
        &plugins.pre_bind,
        &plugins.bind,
        &plugins.post_bind,
        &plugins.permit,
        &plugins.pre_enqueue,
        &plugins.queue_sort,
    ]
    .into_iter()
    .flat_map(|set| set.enabled.iter().map(|p| p.name.as_str()))
    .collect()
}

/// `cpu` and `memory`, weight 1 each (upstream `defaultResourceSpec`).
pub fn default_resource_spec() -> Vec<ResourceSpec> {
    vec![ResourceSpec::new("cpu", 1), ResourceSpec::new("memory", 1)]
}

/// Upstream `SetDefaults_DefaultPreemptionArgs`.
pub fn default_preemption_args(args: &mut DefaultPreemptionArgs) {
    args.min_candidate_nodes_percentage.get_or_insert(10);
    args.min_candidate_nodes_absolute.get_or_insert(100);
}

/// Upstream `SetDefaults_InterPodAffinityArgs`.
pub fn default_inter_pod_affinity_args(args: &mut InterPodAffinityArgs) {
    args.hard_pod_affinity_weight.get_or_insert(1);
}

/// Upstream `SetDefaults_VolumeBindingArgs` (StorageCapacityScoring off: no shape).
pub fn default_volume_binding_args(args: &mut VolumeBindingArgs) {
    args.bind_timeout_seconds.get_or_insert(600);
}

/// Upstream `SetDefaults_NodeResourcesBalancedAllocationArgs`.
pub fn default_balanced_allocation_args(args: &mut NodeResourcesBalancedAllocationArgs) {
    if args.resources.is_empty() {
        args.resources = default_resource_spec();
        return;
    }
    for r in &mut args.resources {
        if r.weight == 0 {
            r.weight = 1;
        }
    }
}

/// Upstream `SetDefaults_PodTopologySpreadArgs`.
pub fn default_pod_topology_spread_args(args: &mut PodTopologySpreadArgs) {
    if args.defaulting_type.is_empty() {
        args.defaulting_type = "System".into();
    }
}

/// Upstream `SetDefaults_NodeResourcesFitArgs`: LeastAllocated over cpu and memory when
/// no strategy is given; the default resources when the strategy lists none; weight 1
/// where 0. (A strategy given without `type` keeps it empty, which validation refuses,
/// as upstream.)
pub fn default_node_resources_fit_args(args: &mut NodeResourcesFitArgs) {
    let strategy = args
        .scoring_strategy
        .get_or_insert_with(|| ScoringStrategy {
            type_: "LeastAllocated".into(),
            resources: default_resource_spec(),
            requested_to_capacity_ratio: None,
        });
    if strategy.resources.is_empty() {
        strategy.resources = default_resource_spec();
    }
    for r in &mut strategy.resources {
        if r.weight == 0 {
            r.weight = 1;
        }
    }
}

/// The defaulted args of an in-tree plugin, as JSON without `apiVersion`, `kind` and
/// null fields: `args` (`null` for none) decoded strictly into the plugin's args type,
/// defaulted, encoded again. `Ok(None)` for a plugin without an args type (out-of-tree,
/// or taking no args). Errors (the message of a strict decoding error): `args` not an
/// object, an unknown field, a wrong type, or a `kind`/`apiVersion` that is not the
/// plugin's.
pub fn defaulted_args(plugin: &str, args: &Value) -> Result<Option<Value>, String> {
    let out = match plugin {
        "DefaultPreemption" => typed(plugin, args, default_preemption_args)?,
        "InterPodAffinity" => typed(plugin, args, default_inter_pod_affinity_args)?,
        "NodeAffinity" => typed(plugin, args, |_: &mut NodeAffinityArgs| {})?,
        "NodeResourcesBalancedAllocation" => typed(plugin, args, default_balanced_allocation_args)?,
        "NodeResourcesFit" => typed(plugin, args, default_node_resources_fit_args)?,
        "PodTopologySpread" => typed(plugin, args, default_pod_topology_spread_args)?,
        "VolumeBinding" => typed(plugin, args, default_volume_binding_args)?,
        _ => return Ok(None),
    };
    Ok(Some(out))
}

/// Decodes `args` strictly as `T`, applies `default`, encodes the result.
fn typed<T: DeserializeOwned + Serialize>(
    plugin: &str,
    args: &Value,
    default: impl FnOnce(&mut T),
) -> Result<Value, String> {
    let mut object = match args {
        Value::Null => serde_json::Map::new(),
        Value::Object(map) => map.clone(),
        other => {
            return Err(format!(
                "decoding args for plugin {plugin}: args must be an object, not {other}"
            ));
        }
    };
    let want_kind = format!("{plugin}Args");
    if let Some(kind) = object.remove("kind")
        && kind.as_str() != Some(want_kind.as_str())
    {
        return Err(format!(
            "args for plugin {plugin} were not of type {want_kind}.kubescheduler.config.k8s.io, got {kind}"
        ));
    }
    if let Some(version) = object.remove("apiVersion")
        && version.as_str() != Some(API_VERSION)
    {
        return Err(format!(
            "args for plugin {plugin} were not of version {API_VERSION}, got {version}"
        ));
    }
    let input = Value::Object(object);
    let mut decoded: T = serde_json::from_value(input.clone())
        .map_err(|e| format!("decoding args for plugin {plugin}: {e}"))?;
    let roundtrip = serde_json::to_value(&decoded)
        .map_err(|e| format!("decoding args for plugin {plugin}: {e}"))?;
    let unknown = super::unknown_fields(&input, &roundtrip);
    if !unknown.is_empty() {
        return Err(format!(
            "decoding args for plugin {plugin}: strict decoding error: {}",
            unknown.join(", ")
        ));
    }
    default(&mut decoded);
    let mut out = serde_json::to_value(&decoded)
        .map_err(|e| format!("encoding args for plugin {plugin}: {e}"))?;
    strip_nulls(&mut out);
    Ok(out)
}

/// Removes the object members whose value is null, at every depth.
pub fn strip_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(strip_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(enabled: &[(&str, Option<i32>)], disabled: &[&str]) -> PluginSet {
        PluginSet {
            enabled: enabled
                .iter()
                .map(|(n, w)| Plugin {
                    name: (*n).into(),
                    weight: *w,
                })
                .collect(),
            disabled: disabled.iter().map(|n| Plugin::named(n)).collect(),
        }
    }

    /// Upstream's `TestMergePlugins` cases, on one point.
    #[test]
    fn merge_plugin_set_as_upstream() {
        let defaults = set(&[("A", Some(1)), ("B", None), ("C", Some(3))], &[]);
        let cases: Vec<(&str, PluginSet, PluginSet)> = vec![
            ("no custom", PluginSet::default(), defaults.clone()),
            (
                "append custom",
                set(&[("X", Some(5))], &[]),
                set(
                    &[("A", Some(1)), ("B", None), ("C", Some(3)), ("X", Some(5))],
                    &[],
                ),
            ),
            (
                "disable one and add",
                set(&[("X", None)], &["B"]),
                set(&[("A", Some(1)), ("C", Some(3)), ("X", None)], &["B"]),
            ),
            (
                "disable all",
                set(&[("C", Some(9)), ("X", None)], &["*"]),
                set(&[("C", Some(9)), ("X", None)], &["*"]),
            ),
            (
                "reconfigure in place",
                set(&[("X", None), ("B", Some(7))], &[]),
                set(
                    &[("A", Some(1)), ("B", Some(7)), ("C", Some(3)), ("X", None)],
                    &[],
                ),
            ),
            (
                "disable then re-enable moves it last",
                set(&[("A", Some(4))], &["A"]),
                set(&[("B", None), ("C", Some(3)), ("A", Some(4))], &["A"]),
            ),
            (
                "duplicated custom plugin kept for the framework to refuse",
                set(&[("B", Some(1)), ("B", Some(2))], &[]),
                set(
                    &[
                        ("A", Some(1)),
                        ("B", Some(2)),
                        ("C", Some(3)),
                        ("B", Some(1)),
                    ],
                    &[],
                ),
            ),
        ];
        for (name, custom, want) in cases {
            assert_eq!(merge_plugin_set(&defaults, &custom), want, "{name}");
        }
        assert_eq!(merge_plugins(default_plugins(), None), default_plugins());
    }

    #[test]
    fn profile_names_are_defaulted_only_for_a_lone_profile() {
        let mut cfg = KubeSchedulerConfiguration::empty();
        cfg.profiles = vec![
            KubeSchedulerProfile::default(),
            KubeSchedulerProfile::default(),
        ];
        set_defaults(&mut cfg);
        assert_eq!(cfg.profiles[0].scheduler_name, None);
        assert_eq!(cfg.profiles[1].scheduler_name, None);

        let mut cfg = KubeSchedulerConfiguration::empty();
        cfg.profiles = vec![KubeSchedulerProfile {
            scheduler_name: Some(String::new()),
            ..KubeSchedulerProfile::default()
        }];
        set_defaults(&mut cfg);
        assert_eq!(cfg.profiles[0].scheduler_name.as_deref(), Some(""));

        let cfg = KubeSchedulerConfiguration::default();
        assert_eq!(cfg.profiles.len(), 1);
        assert_eq!(cfg.profiles[0].name(), DEFAULT_SCHEDULER_NAME);
        assert_eq!(cfg.profiles[0].plugins, Some(default_plugins()));
    }

    #[test]
    fn plugin_args_defaults() {
        let cases: Vec<(&str, Value, Value)> = vec![
            (
                "DefaultPreemption",
                json!({"minCandidateNodesAbsolute": 0}),
                json!({"minCandidateNodesPercentage": 10, "minCandidateNodesAbsolute": 0}),
            ),
            (
                "InterPodAffinity",
                json!({"ignorePreferredTermsOfExistingPods": true}),
                json!({"hardPodAffinityWeight": 1, "ignorePreferredTermsOfExistingPods": true}),
            ),
            (
                "NodeResourcesBalancedAllocation",
                json!({"resources": [{"name": "cpu"}, {"name": "nvidia.com/gpu", "weight": 1}]}),
                json!({"resources": [{"name": "cpu", "weight": 1}, {"name": "nvidia.com/gpu", "weight": 1}]}),
            ),
            (
                "NodeResourcesFit",
                json!({"scoringStrategy": {"type": "RequestedToCapacityRatio",
                    "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}]}}}),
                json!({"ignoredResources": [], "ignoredResourceGroups": [],
                    "scoringStrategy": {"type": "RequestedToCapacityRatio",
                        "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}],
                        "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}]}}}),
            ),
            (
                "NodeResourcesFit",
                json!({"scoringStrategy": {"resources": [{"name": "memory", "weight": 0}]}}),
                json!({"ignoredResources": [], "ignoredResourceGroups": [],
                    "scoringStrategy": {"type": "", "resources": [{"name": "memory", "weight": 1}]}}),
            ),
            (
                "PodTopologySpread",
                json!({"defaultingType": "List"}),
                json!({"defaultConstraints": [], "defaultingType": "List"}),
            ),
            (
                "VolumeBinding",
                json!({"bindTimeoutSeconds": 0}),
                json!({"bindTimeoutSeconds": 0}),
            ),
            (
                "NodeAffinity",
                json!({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}),
                json!({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}),
            ),
        ];
        for (plugin, given, want) in cases {
            assert_eq!(
                defaulted_args(plugin, &given),
                Ok(Some(want)),
                "{plugin} {given}"
            );
        }
        assert_eq!(defaulted_args("PrioritySort", &json!({"x": 1})), Ok(None));
        assert_eq!(
            defaulted_args("VolumeBinding", &json!([1])),
            Err("decoding args for plugin VolumeBinding: args must be an object, not [1]".into())
        );
        assert_eq!(
            defaulted_args("VolumeBinding", &json!({"apiVersion": "kubescheduler.config.k8s.io/v1beta3"})),
            Err("args for plugin VolumeBinding were not of version kubescheduler.config.k8s.io/v1, got \"kubescheduler.config.k8s.io/v1beta3\"".into())
        );
    }

    #[test]
    fn user_args_are_defaulted_and_missing_ones_added() {
        let mut cfg = KubeSchedulerConfiguration::empty();
        cfg.profiles = vec![KubeSchedulerProfile {
            scheduler_name: Some("p".into()),
            plugins: Some(Plugins {
                multi_point: PluginSet {
                    enabled: vec![],
                    disabled: vec![Plugin::named("VolumeBinding")],
                },
                ..Plugins::default()
            }),
            plugin_config: vec![PluginConfig {
                name: "InterPodAffinity".into(),
                args: json!({"hardPodAffinityWeight": 50}),
            }],
            ..KubeSchedulerProfile::default()
        }];
        set_defaults(&mut cfg);
        let pcs = &cfg.profiles[0].plugin_config;
        let names: Vec<&str> = pcs.iter().map(|p| p.name.as_str()).collect();
        // The user's entry first, then the defaults by name; VolumeBinding is disabled.
        assert_eq!(
            names,
            [
                "InterPodAffinity",
                "DefaultPreemption",
                "NodeAffinity",
                "NodeResourcesBalancedAllocation",
                "NodeResourcesFit",
                "PodTopologySpread",
            ]
        );
        assert_eq!(
            pcs[0].args,
            json!({"hardPodAffinityWeight": 50, "ignorePreferredTermsOfExistingPods": false})
        );
    }
}
