//! KubeSchedulerConfiguration (`kubescheduler.config.k8s.io/v1`), as kube-scheduler 1.33
//! reads it from `--config`: decoded strictly ([`decode`]), defaulted
//! ([`defaults::set_defaults`]), validated ([`validation::validate`]), then expanded into
//! what the framework runs, one [`ProfileSpec`] per profile ([`profile_specs`]).
//!
//! [`load`] does the first three on a file; `KubeSchedulerConfiguration::default()` is
//! what an object with only `apiVersion` and `kind` becomes.

pub mod defaults;
pub mod types;
pub mod validation;

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use serde_json::Value;

pub use types::*;

use crate::error::Error;
use crate::framework::runtime::{ExtensionPoint, ProfileSpec};

/// Reads, decodes, defaults and validates the configuration file at `path` (YAML or
/// JSON). Errors: [`Error::Io`] when it cannot be read, [`Error::Config`] for every
/// other problem (see [`parse`]).
pub fn load(path: &Path) -> Result<KubeSchedulerConfiguration, Error> {
    let content = std::fs::read(path).map_err(|source| Error::Io {
        path: path.to_owned(),
        source,
    })?;
    parse(&content)
}

/// Decodes ([`decode`]), defaults ([`defaults::set_defaults`]) and validates
/// ([`validation::validate`]) a configuration document.
pub fn parse(content: &[u8]) -> Result<KubeSchedulerConfiguration, Error> {
    let mut cfg = decode(content)?;
    defaults::set_defaults(&mut cfg);
    validation::validate(&cfg)?;
    Ok(cfg)
}

/// Decodes one YAML or JSON document strictly, as upstream's scheme does, without
/// defaulting it.
///
/// Errors ([`Error::Config`]): not YAML; not an object; `apiVersion`/`kind` missing or
/// not `kubescheduler.config.k8s.io/v1` `KubeSchedulerConfiguration` (v1beta3 and older:
/// "no longer supported"); a field of the wrong type; unknown fields, all named with
/// their path (`strict decoding error: unknown field "profiles[0].plugins.score.enabled[0].wieght"`);
/// in-tree plugin args that do not decode strictly as their type.
pub fn decode(content: &[u8]) -> Result<KubeSchedulerConfiguration, Error> {
    let value = skiff_api::yaml::to_json(content)
        .map_err(|e| Error::Config(format!("decoding the configuration: {e}")))?;
    let Value::Object(object) = &value else {
        let text = String::from_utf8_lossy(content);
        let text: String = text.trim().chars().take(80).collect();
        return Err(Error::Config(format!(
            "Object 'Kind' is missing in '{text}'"
        )));
    };
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
    if kind.is_empty() {
        return Err(Error::Config(
            "Object 'Kind' is missing: a KubeSchedulerConfiguration needs \
             `apiVersion: kubescheduler.config.k8s.io/v1` and `kind: KubeSchedulerConfiguration`"
                .into(),
        ));
    }
    if api_version.is_empty() {
        return Err(Error::Config(format!(
            "Object 'apiVersion' is missing: a KubeSchedulerConfiguration needs \
             `apiVersion: {API_VERSION}`"
        )));
    }
    if let Some(version) = api_version.strip_prefix("kubescheduler.config.k8s.io/")
        && version != "v1"
    {
        return Err(Error::Config(format!(
            "{api_version} is no longer supported: kube-scheduler 1.33 (and Skiff) read \
             only {API_VERSION}; see https://kubernetes.io/docs/reference/scheduling/config/ \
             for the changes"
        )));
    }
    if api_version != API_VERSION || kind != KIND {
        return Err(Error::Config(format!(
            "no kind {kind:?} is registered for version {api_version:?}: expected \
             apiVersion {API_VERSION:?} and kind {KIND:?}"
        )));
    }
    let mut cfg: KubeSchedulerConfiguration = serde_json::from_value(value.clone())
        .map_err(|e| Error::Config(format!("decoding KubeSchedulerConfiguration: {e}")))?;
    let roundtrip = serde_json::to_value(&cfg)
        .map_err(|e| Error::Config(format!("decoding KubeSchedulerConfiguration: {e}")))?;
    let mut strict = unknown_fields(&value, &roundtrip);
    // In-tree plugin args are decoded as their types, strictly too (upstream
    // `DecodeNestedObjects`).
    for (i, profile) in cfg.profiles.iter_mut().enumerate() {
        for (j, pc) in profile.plugin_config.iter_mut().enumerate() {
            match defaults::defaulted_args(&pc.name, &pc.args) {
                Ok(Some(_)) => {
                    // Keep the args as given, without apiVersion and kind (checked).
                    if let Value::Object(map) = &mut pc.args {
                        map.remove("apiVersion");
                        map.remove("kind");
                    }
                }
                Ok(None) => {}
                Err(e) => strict.push(format!("decoding .profiles[{i}].pluginConfig[{j}]: {e}")),
            }
        }
    }
    if !strict.is_empty() {
        return Err(Error::Config(format!(
            "strict decoding error: {}",
            strict.join(", ")
        )));
    }
    Ok(cfg)
}

/// The fields of `input` that decoding dropped, by comparing it with the decoded value
/// encoded again (`output`, where every known field is present): `unknown field "a.b[0].c"`
/// for each, in document order. Members whose value is null are not reported (decoding
/// them is the same as leaving them out).
pub(crate) fn unknown_fields(input: &Value, output: &Value) -> Vec<String> {
    fn walk(input: &Value, output: &Value, path: &str, out: &mut Vec<String>) {
        match (input, output) {
            (Value::Object(a), Value::Object(b)) => {
                for (key, value) in a {
                    let child = if path.is_empty() {
                        key.clone()
                    } else {
                        format!("{path}.{key}")
                    };
                    match b.get(key) {
                        Some(known) => walk(value, known, &child, out),
                        None if value.is_null() => {}
                        None => out.push(format!("unknown field {child:?}")),
                    }
                }
            }
            (Value::Array(a), Value::Array(b)) => {
                for (i, (x, y)) in a.iter().zip(b).enumerate() {
                    walk(x, y, &format!("{path}[{i}]"), out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(input, output, "", &mut out);
    out
}

/// The extension points each in-tree plugin of upstream 1.33 implements (the Go type
/// assertions of `pkg/scheduler/framework/plugins`), in cycle order; None for a plugin
/// upstream does not have. `multiPoint` enables a plugin at exactly these points.
pub fn extension_points_of(plugin: &str) -> Option<&'static [ExtensionPoint]> {
    use ExtensionPoint::*;
    Some(match plugin {
        "SchedulingGates" => &[PreEnqueue],
        "PrioritySort" => &[QueueSort],
        "NodeUnschedulable" | "NodeName" => &[Filter],
        "TaintToleration" => &[Filter, PreScore, Score],
        "NodeAffinity" | "NodeResourcesFit" | "PodTopologySpread" | "InterPodAffinity" => {
            &[PreFilter, Filter, PreScore, Score]
        }
        "NodePorts" | "VolumeRestrictions" | "NodeVolumeLimits" | "VolumeZone" => {
            &[PreFilter, Filter]
        }
        "VolumeBinding" => &[PreFilter, Filter, PreScore, Score, Reserve, PreBind],
        // PreEnqueue holds pods whose asynchronous preemption is under way (1.32+).
        "DefaultPreemption" => &[PreEnqueue, PostFilter],
        "NodeResourcesBalancedAllocation" => &[PreScore, Score],
        "ImageLocality" => &[Score],
        "DefaultBinder" => &[Bind],
        _ => return None,
    })
}

/// The extension points in the order upstream's framework walks them
/// (`getExtensionPoints`), with the Go interface names its messages use.
const POINTS: [(ExtensionPoint, &str); 12] = [
    (ExtensionPoint::PreFilter, "PreFilterPlugin"),
    (ExtensionPoint::Filter, "FilterPlugin"),
    (ExtensionPoint::PostFilter, "PostFilterPlugin"),
    (ExtensionPoint::Reserve, "ReservePlugin"),
    (ExtensionPoint::PreScore, "PreScorePlugin"),
    (ExtensionPoint::Score, "ScorePlugin"),
    (ExtensionPoint::PreBind, "PreBindPlugin"),
    (ExtensionPoint::Bind, "BindPlugin"),
    (ExtensionPoint::PostBind, "PostBindPlugin"),
    (ExtensionPoint::Permit, "PermitPlugin"),
    (ExtensionPoint::PreEnqueue, "PreEnqueuePlugin"),
    (ExtensionPoint::QueueSort, "QueueSortPlugin"),
];

fn point_set(plugins: &Plugins, point: ExtensionPoint) -> &PluginSet {
    match point {
        ExtensionPoint::PreEnqueue => &plugins.pre_enqueue,
        ExtensionPoint::QueueSort => &plugins.queue_sort,
        ExtensionPoint::PreFilter => &plugins.pre_filter,
        ExtensionPoint::Filter => &plugins.filter,
        ExtensionPoint::PostFilter => &plugins.post_filter,
        ExtensionPoint::PreScore => &plugins.pre_score,
        ExtensionPoint::Score => &plugins.score,
        ExtensionPoint::Reserve => &plugins.reserve,
        ExtensionPoint::Permit => &plugins.permit,
        ExtensionPoint::PreBind => &plugins.pre_bind,
        ExtensionPoint::Bind => &plugins.bind,
        ExtensionPoint::PostBind => &plugins.post_bind,
    }
}

/// Whether `plugin` implements `point`; None for a plugin the table does not know.
fn implements(plugin: &str, point: ExtensionPoint) -> Option<bool> {
    extension_points_of(plugin).map(|points| points.contains(&point))
}

/// The profiles as the framework runs them (upstream `NewFramework` and
/// `profile.NewMap`), in the configuration's order, from a defaulted configuration.
///
/// For each profile: the plugins enabled at each point (checked: a plugin the table
/// [`extension_points_of`] knows must implement the point, and appear once); then the
/// `multiPoint` plugins added at every point they implement, unless disabled there
/// (by name or `*`), upstream's order being: the `multiPoint` plugins also enabled at
/// the point (in the point's order, their settings winning), then the other
/// `multiPoint` plugins, then the point's other plugins. Score weights come from
/// `score` first, then `multiPoint`; unset or 0 is 1. Every needed plugin's
/// `pluginConfig` args are attached. Out-of-tree plugins enabled at a given point pass
/// through (the framework's registry decides).
///
/// Errors ([`Error::Config`], `initializing profiles: creating profile for scheduler
/// name <name>: ...` for one profile's): a `multiPoint` plugin that does not exist, a
/// plugin that does not implement its point or is registered twice, repeated plugin
/// args, not exactly one QueueSort plugin, no Bind plugin, score weights that could
/// overflow; across profiles, different QueueSort plugins or args.
pub fn profile_specs(cfg: &KubeSchedulerConfiguration) -> Result<Vec<ProfileSpec>, Error> {
    let mut specs = Vec::with_capacity(cfg.profiles.len());
    let mut first_queue_sort: Option<(String, Option<Value>)> = None;
    for profile in &cfg.profiles {
        let name = profile.name();
        let spec = profile_spec(profile).map_err(|e| {
            Error::Config(format!(
                "initializing profiles: creating profile for scheduler name {name}: {e}"
            ))
        })?;
        let queue_sort = spec
            .points
            .get(&ExtensionPoint::QueueSort)
            .and_then(|q| q.first())
            .cloned()
            .unwrap_or_default();
        let args = spec.plugin_args.get(&queue_sort).cloned();
        match &first_queue_sort {
            None => first_queue_sort = Some((queue_sort, args)),
            Some((first, first_args)) => {
                if *first != queue_sort {
                    return Err(Error::Config(format!(
                        "initializing profiles: different queue sort plugins for profile {name:?}: {queue_sort:?}, first: {first:?}"
                    )));
                }
                if *first_args != args {
                    return Err(Error::Config(format!(
                        "initializing profiles: different queue sort plugin args for profile {name:?}"
                    )));
                }
            }
        }
        specs.push(spec);
    }
    Ok(specs)
}

/// One profile's expansion; errors are the bare messages of upstream's framework.
fn profile_spec(profile: &KubeSchedulerProfile) -> Result<ProfileSpec, String> {
    let merged;
    let plugins = match &profile.plugins {
        Some(p) => p,
        None => {
            merged = defaults::merge_plugins(defaults::default_plugins(), None);
            &merged
        }
    };
    let mut spec = ProfileSpec {
        scheduler_name: profile.name().to_owned(),
        percentage_of_nodes_to_score: profile.percentage_of_nodes_to_score,
        ..ProfileSpec::default()
    };

    // Args by plugin (upstream: "repeated config for plugin").
    let mut args: HashMap<&str, &Value> = HashMap::new();
    for pc in &profile.plugin_config {
        if args.insert(pc.name.as_str(), &pc.args).is_some() {
            return Err(format!("repeated config for plugin {}", pc.name));
        }
    }

    // The plugins enabled at each point (upstream `updatePluginList`).
    for (point, type_name) in POINTS {
        let mut list: Vec<String> = Vec::new();
        for p in &point_set(plugins, point).enabled {
            if implements(&p.name, point) == Some(false) {
                return Err(format!(
                    "plugin {:?} does not extend {type_name} plugin",
                    p.name
                ));
            }
            if list.contains(&p.name) {
                return Err(format!(
                    "plugin {:?} already registered as {type_name:?}",
                    p.name
                ));
            }
            list.push(p.name.clone());
        }
        spec.points.insert(point, list);
    }

    // multiPoint (upstream `expandMultiPointPlugins`).
    if !plugins.multi_point.enabled.is_empty() {
        for (point, type_name) in POINTS {
            let set = point_set(plugins, point);
            let disabled: BTreeSet<&str> = set.disabled.iter().map(|p| p.name.as_str()).collect();
            if disabled.contains("*") {
                continue;
            }
            let enabled: Vec<&str> = set.enabled.iter().map(|p| p.name.as_str()).collect();
            let mut multi: Vec<&str> = Vec::new();
            let mut overrides: BTreeSet<&str> = BTreeSet::new();
            for p in &plugins.multi_point.enabled {
                let Some(implemented) = implements(&p.name, point) else {
                    return Err(format!("{type_name} {:?} does not exist", p.name));
                };
                if !implemented || disabled.contains(p.name.as_str()) {
                    continue;
                }
                if enabled.contains(&p.name.as_str()) {
                    overrides.insert(p.name.as_str());
                    continue;
                }
                if multi.contains(&p.name.as_str()) {
                    return Err(format!(
                        "plugin {:?} already registered as {type_name:?}",
                        p.name
                    ));
                }
                multi.push(p.name.as_str());
            }
            let ordered: Vec<String> = enabled
                .iter()
                .filter(|n| overrides.contains(*n))
                .chain(&multi)
                .chain(enabled.iter().filter(|n| !overrides.contains(*n)))
                .map(|n| (*n).to_owned())
                .collect();
            spec.points.insert(point, ordered);
        }
    }

    // Score weights (upstream `getScoreWeights`): `score` entries first, then
    // `multiPoint`; the first weight of a plugin wins; 0 or unset is 1.
    let mut total: i64 = 0;
    for p in plugins
        .score
        .enabled
        .iter()
        .chain(&plugins.multi_point.enabled)
    {
        if implements(&p.name, ExtensionPoint::Score) == Some(false)
            || spec.score_weights.contains_key(&p.name)
        {
            continue;
        }
        let weight = match p.weight.unwrap_or(0) {
            0 => 1,
            w => i64::from(w),
        };
        let points = weight.saturating_mul(crate::framework::types::MAX_NODE_SCORE);
        if points > i64::MAX - total {
            return Err("total score of Score plugins could overflow".into());
        }
        total += points;
        spec.score_weights.insert(p.name.clone(), weight);
    }

    let queue_sorts = spec
        .points
        .get(&ExtensionPoint::QueueSort)
        .map_or(0, Vec::len);
    if queue_sorts != 1 {
        return Err(format!(
            "only one queue sort plugin required for profile with scheduler name {:?}, but got {queue_sorts}",
            spec.scheduler_name
        ));
    }
    if spec
        .points
        .get(&ExtensionPoint::Bind)
        .is_none_or(Vec::is_empty)
    {
        return Err(format!(
            "at least one bind plugin is needed for profile with scheduler name {:?}",
            spec.scheduler_name
        ));
    }

    // Args of every plugin the profile needs (upstream `pluginsNeeded`).
    for name in defaults::plugin_names(plugins) {
        if let Some(value) = args.get(name).filter(|v| !v.is_null()) {
            let mut value = (*value).clone();
            defaults::strip_nulls(&mut value);
            spec.plugin_args.insert(name.to_owned(), value);
        }
    }
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const HEADER: &str =
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n";

    fn parse_body(body: &str) -> Result<KubeSchedulerConfiguration, Error> {
        parse(format!("{HEADER}{body}").as_bytes())
    }

    fn error_of(body: &str) -> String {
        match parse_body(body).and_then(|c| profile_specs(&c).map(|_| c)) {
            Ok(_) => panic!("accepted: {body}"),
            Err(e) => e.to_string(),
        }
    }

    fn specs(body: &str) -> Vec<ProfileSpec> {
        let cfg = parse_body(body).unwrap_or_else(|e| panic!("{e}"));
        profile_specs(&cfg).unwrap_or_else(|e| panic!("{e}"))
    }

    fn names(spec: &ProfileSpec, point: ExtensionPoint) -> Vec<&str> {
        spec.points
            .get(&point)
            .map(|v| v.iter().map(String::as_str).collect())
            .unwrap_or_default()
    }

    /// Upstream 1.33's default profile after multiPoint expansion
    /// (`testing/defaults.ExpandedPluginsV1` without the removed volume limit plugins, with
    /// DefaultPreemption's PreEnqueue).
    #[test]
    fn empty_config_expands_to_upstream_default_profile() {
        let cfg = parse(HEADER.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cfg, KubeSchedulerConfiguration::default());
        let specs = profile_specs(&cfg).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(specs.len(), 1);
        let s = &specs[0];
        assert_eq!(s.scheduler_name, "default-scheduler");
        assert_eq!(s.percentage_of_nodes_to_score, None);
        use ExtensionPoint::*;
        let want: [(ExtensionPoint, &[&str]); 12] = [
            (PreEnqueue, &["SchedulingGates", "DefaultPreemption"]),
            (QueueSort, &["PrioritySort"]),
            (
                PreFilter,
                &[
                    "NodeAffinity",
                    "NodePorts",
                    "NodeResourcesFit",
                    "VolumeRestrictions",
                    "NodeVolumeLimits",
                    "VolumeBinding",
                    "VolumeZone",
                    "PodTopologySpread",
                    "InterPodAffinity",
                ],
            ),
            (
                Filter,
                &[
                    "NodeUnschedulable",
                    "NodeName",
                    "TaintToleration",
                    "NodeAffinity",
                    "NodePorts",
                    "NodeResourcesFit",
                    "VolumeRestrictions",
                    "NodeVolumeLimits",
                    "VolumeBinding",
                    "VolumeZone",
                    "PodTopologySpread",
                    "InterPodAffinity",
                ],
            ),
            (PostFilter, &["DefaultPreemption"]),
            (
                PreScore,
                &[
                    "TaintToleration",
                    "NodeAffinity",
                    "NodeResourcesFit",
                    "VolumeBinding",
                    "PodTopologySpread",
                    "InterPodAffinity",
                    "NodeResourcesBalancedAllocation",
                ],
            ),
            (
                Score,
                &[
                    "TaintToleration",
                    "NodeAffinity",
                    "NodeResourcesFit",
                    "VolumeBinding",
                    "PodTopologySpread",
                    "InterPodAffinity",
                    "NodeResourcesBalancedAllocation",
                    "ImageLocality",
                ],
            ),
            (Reserve, &["VolumeBinding"]),
            (Permit, &[]),
            (PreBind, &["VolumeBinding"]),
            (Bind, &["DefaultBinder"]),
            (PostBind, &[]),
        ];
        for (point, plugins) in want {
            assert_eq!(names(s, point), plugins, "{point:?}");
        }
        let weights: Vec<(&str, i64)> = names(s, Score)
            .into_iter()
            .map(|n| (n, s.score_weights.get(n).copied().unwrap_or(-1)))
            .collect();
        assert_eq!(
            weights,
            [
                ("TaintToleration", 3),
                ("NodeAffinity", 2),
                ("NodeResourcesFit", 1),
                ("VolumeBinding", 1),
                ("PodTopologySpread", 2),
                ("InterPodAffinity", 2),
                ("NodeResourcesBalancedAllocation", 1),
                ("ImageLocality", 1),
            ]
        );
        let mut args: Vec<(&str, &Value)> =
            s.plugin_args.iter().map(|(k, v)| (k.as_str(), v)).collect();
        args.sort_by_key(|(k, _)| *k);
        let cpu_memory = json!([{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]);
        assert_eq!(
            args,
            [
                (
                    "DefaultPreemption",
                    &json!({"minCandidateNodesPercentage": 10, "minCandidateNodesAbsolute": 100})
                ),
                (
                    "InterPodAffinity",
                    &json!({"hardPodAffinityWeight": 1, "ignorePreferredTermsOfExistingPods": false})
                ),
                ("NodeAffinity", &json!({})),
                (
                    "NodeResourcesBalancedAllocation",
                    &json!({"resources": cpu_memory})
                ),
                (
                    "NodeResourcesFit",
                    &json!({
                        "ignoredResources": [],
                        "ignoredResourceGroups": [],
                        "scoringStrategy": {"type": "LeastAllocated", "resources": cpu_memory}
                    })
                ),
                (
                    "PodTopologySpread",
                    &json!({"defaultConstraints": [], "defaultingType": "System"})
                ),
                ("VolumeBinding", &json!({"bindTimeoutSeconds": 600})),
            ]
        );
        // The scalar defaults.
        assert_eq!(cfg.parallelism, Some(16));
        assert_eq!(cfg.percentage_of_nodes_to_score, Some(0));
        assert_eq!(cfg.pod_initial_backoff_seconds, Some(1));
        assert_eq!(cfg.pod_max_backoff_seconds, Some(10));
        let le = &cfg.leader_election;
        assert_eq!(le.leader_elect, Some(true));
        assert_eq!(le.lease_duration, GoDuration::from_secs(15));
        assert_eq!(le.renew_deadline, GoDuration::from_secs(10));
        assert_eq!(le.retry_period, GoDuration::from_secs(2));
        assert_eq!(
            (
                le.resource_lock.as_str(),
                le.resource_name.as_str(),
                le.resource_namespace.as_str()
            ),
            ("leases", "kube-scheduler", "kube-system")
        );
        let cc = &cfg.client_connection;
        assert_eq!(cc.qps, 50.0);
        assert_eq!(cc.burst, 100);
        assert_eq!(cc.content_type, "application/vnd.kubernetes.protobuf");
        assert_eq!(cfg.enable_profiling, Some(true));
        assert_eq!(cfg.enable_contention_profiling, Some(true));
        assert!(!cfg.delay_cache_until_active);
        // Plugin args are listed by name, as upstream's sorted pluginsNames.
        let configured: Vec<&str> = cfg.profiles[0]
            .plugin_config
            .iter()
            .map(|p| p.name.as_str())
            .collect();
        assert_eq!(configured, defaults::PLUGINS_WITH_ARGS);
    }

    #[test]
    fn json_and_yaml_and_files_load_alike() {
        let json = br#"{"apiVersion":"kubescheduler.config.k8s.io/v1","kind":"KubeSchedulerConfiguration","parallelism":4}"#;
        let from_json = parse(json).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(from_json.parallelism, Some(4));
        let from_yaml = parse_body("parallelism: 4\n").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(from_json, from_yaml);

        let path =
            std::env::temp_dir().join(format!("skiff-sched-config-{}.yaml", std::process::id()));
        std::fs::write(&path, format!("{HEADER}parallelism: 4\n"))
            .unwrap_or_else(|e| panic!("{e}"));
        let loaded = load(&path);
        let _ = std::fs::remove_file(&path);
        assert_eq!(loaded.unwrap_or_else(|e| panic!("{e}")), from_yaml);
        let missing = load(Path::new("/nonexistent/skiff-scheduler.yaml"));
        assert!(matches!(missing, Err(Error::Io { .. })), "{missing:?}");
    }

    #[test]
    fn disabling_plugins() {
        // Through multiPoint: gone from every point.
        let s = &specs(
            "profiles:\n- plugins:\n    multiPoint:\n      disabled:\n      - name: TaintToleration\n",
        )[0];
        for point in [
            ExtensionPoint::Filter,
            ExtensionPoint::PreScore,
            ExtensionPoint::Score,
        ] {
            assert!(!names(s, point).contains(&"TaintToleration"), "{point:?}");
        }
        assert!(!s.score_weights.is_empty());
        // At one point: only there.
        let s = &specs(
            "profiles:\n- plugins:\n    score:\n      disabled:\n      - name: NodeResourcesFit\n",
        )[0];
        assert!(!names(s, ExtensionPoint::Score).contains(&"NodeResourcesFit"));
        assert!(names(s, ExtensionPoint::PreScore).contains(&"NodeResourcesFit"));
        assert!(names(s, ExtensionPoint::Filter).contains(&"NodeResourcesFit"));
        // "*" at a point: nothing from multiPoint there, the rest untouched.
        let s = &specs(
            "profiles:\n- schedulerName: no-scoring\n  plugins:\n    preScore:\n      disabled:\n      - name: '*'\n    score:\n      disabled:\n      - name: '*'\n",
        )[0];
        assert_eq!(s.scheduler_name, "no-scoring");
        assert!(names(s, ExtensionPoint::Score).is_empty());
        assert!(names(s, ExtensionPoint::PreScore).is_empty());
        assert_eq!(names(s, ExtensionPoint::Filter).len(), 12);
        // "*" in multiPoint drops every default; what is enabled remains.
        let s = &specs(
            "profiles:\n- plugins:\n    multiPoint:\n      enabled:\n      - name: PrioritySort\n      - name: NodeName\n      - name: DefaultBinder\n      disabled:\n      - name: '*'\n",
        )[0];
        assert_eq!(names(s, ExtensionPoint::Filter), ["NodeName"]);
        assert_eq!(names(s, ExtensionPoint::QueueSort), ["PrioritySort"]);
        assert_eq!(names(s, ExtensionPoint::Bind), ["DefaultBinder"]);
        assert!(names(s, ExtensionPoint::Score).is_empty());
        assert!(names(s, ExtensionPoint::PreEnqueue).is_empty());
        // The args of plugins no longer enabled are not added.
        assert!(s.plugin_args.is_empty());
    }

    #[test]
    fn enabling_at_one_point_overrides_multi_point() {
        // A default plugin re-enabled at Score comes first there, with its new weight.
        let s = &specs(
            "profiles:\n- plugins:\n    score:\n      enabled:\n      - name: NodeResourcesFit\n        weight: 5\n",
        )[0];
        assert_eq!(
            names(s, ExtensionPoint::Score),
            [
                "NodeResourcesFit",
                "TaintToleration",
                "NodeAffinity",
                "VolumeBinding",
                "PodTopologySpread",
                "InterPodAffinity",
                "NodeResourcesBalancedAllocation",
                "ImageLocality",
            ]
        );
        assert_eq!(s.score_weights.get("NodeResourcesFit"), Some(&5));
        // The other points keep the multiPoint order.
        assert_eq!(names(s, ExtensionPoint::PreScore)[2], "NodeResourcesFit");
        // A multiPoint weight replaces the default in place.
        let s = &specs(
            "profiles:\n- plugins:\n    multiPoint:\n      enabled:\n      - name: ImageLocality\n        weight: 7\n      - name: TaintToleration\n        weight: 0\n",
        )[0];
        assert_eq!(
            names(s, ExtensionPoint::Score).last(),
            Some(&"ImageLocality")
        );
        assert_eq!(s.score_weights.get("ImageLocality"), Some(&7));
        assert_eq!(s.score_weights.get("TaintToleration"), Some(&1));
        // A plugin moved by disabling and re-enabling at a point goes last there.
        let s = &specs(
            "profiles:\n- plugins:\n    filter:\n      disabled:\n      - name: NodeName\n      enabled:\n      - name: NodeName\n",
        )[0];
        assert_eq!(names(s, ExtensionPoint::Filter).last(), Some(&"NodeName"));
        assert_eq!(names(s, ExtensionPoint::Filter).len(), 12);
        let s = &specs(
            "profiles:\n- plugins:\n    filter:\n      disabled:\n      - name: '*'\n      enabled:\n      - name: NodeName\n      - name: NodeUnschedulable\n",
        )[0];
        assert_eq!(
            names(s, ExtensionPoint::Filter),
            ["NodeName", "NodeUnschedulable"]
        );
    }

    #[test]
    fn second_profile_with_its_own_name_and_percentage() {
        let specs = specs(
            "percentageOfNodesToScore: 40\nprofiles:\n- schedulerName: default-scheduler\n- schedulerName: bin-packing\n  percentageOfNodesToScore: 70\n  pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n        type: MostAllocated\n        resources:\n        - name: cpu\n          weight: 3\n        - name: memory\n",
        );
        assert_eq!(specs.len(), 2);
        assert_eq!(specs[0].scheduler_name, "default-scheduler");
        assert_eq!(specs[0].percentage_of_nodes_to_score, None);
        assert_eq!(specs[1].scheduler_name, "bin-packing");
        assert_eq!(specs[1].percentage_of_nodes_to_score, Some(70));
        assert_eq!(
            specs[0]
                .plugin_args
                .get("NodeResourcesFit")
                .and_then(|a| a.pointer("/scoringStrategy/type")),
            Some(&json!("LeastAllocated"))
        );
        // MostAllocated passes through, its resource weights defaulted.
        assert_eq!(
            specs[1].plugin_args.get("NodeResourcesFit"),
            Some(&json!({
                "ignoredResources": [],
                "ignoredResourceGroups": [],
                "scoringStrategy": {
                    "type": "MostAllocated",
                    "resources": [{"name": "cpu", "weight": 3}, {"name": "memory", "weight": 1}]
                }
            }))
        );
        assert_eq!(specs[0].points, specs[1].points);
    }

    #[test]
    fn out_of_tree_args_are_kept_as_given() {
        let cfg = parse_body(
            "profiles:\n- pluginConfig:\n  - name: MyPlugin\n    args:\n      anything: [1, {x: y}]\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            cfg.profiles[0].plugin_config[0].args,
            json!({"anything": [1, {"x": "y"}]})
        );
        // Given args of in-tree plugins lose apiVersion and kind once checked.
        let cfg = parse_body(
            "profiles:\n- pluginConfig:\n  - name: InterPodAffinity\n    args:\n      apiVersion: kubescheduler.config.k8s.io/v1\n      kind: InterPodAffinityArgs\n      hardPodAffinityWeight: 5\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            cfg.profiles[0].plugin_config[0].args,
            json!({"hardPodAffinityWeight": 5, "ignorePreferredTermsOfExistingPods": false})
        );
    }

    #[test]
    fn strict_decoding_names_unknown_fields() {
        let cases: &[(&str, &str)] = &[
            (
                "profiles:\n- plugins:\n    score:\n      enabled:\n      - name: ImageLocality\n        wieght: 2\n",
                r#"invalid configuration: strict decoding error: unknown field "profiles[0].plugins.score.enabled[0].wieght""#,
            ),
            (
                "healthzBindAddress: 0.0.0.0:10251\nleaderElection:\n  leaseDurationSeconds: 15\n",
                r#"invalid configuration: strict decoding error: unknown field "healthzBindAddress", unknown field "leaderElection.leaseDurationSeconds""#,
            ),
            (
                "profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n        typ: MostAllocated\n",
                r#"invalid configuration: strict decoding error: decoding .profiles[0].pluginConfig[0]: decoding args for plugin NodeResourcesFit: strict decoding error: unknown field "scoringStrategy.typ""#,
            ),
            (
                "profiles:\n- pluginConfig:\n  - name: PodTopologySpread\n    args:\n      defaultConstraints:\n      - maxSkew: 1\n        topologyKey: zone\n        whenUnsatisfiable: DoNotSchedule\n        selector: {}\n",
                r#"invalid configuration: strict decoding error: decoding .profiles[0].pluginConfig[0]: decoding args for plugin PodTopologySpread: strict decoding error: unknown field "defaultConstraints[0].selector""#,
            ),
            (
                "profiles:\n- pluginConfig:\n  - name: VolumeBinding\n    args:\n      kind: NodeAffinityArgs\n",
                r#"invalid configuration: strict decoding error: decoding .profiles[0].pluginConfig[0]: args for plugin VolumeBinding were not of type VolumeBindingArgs.kubescheduler.config.k8s.io, got "NodeAffinityArgs""#,
            ),
            (
                "parallelism: many\n",
                "invalid configuration: decoding KubeSchedulerConfiguration: invalid type: string \"many\", expected i32",
            ),
        ];
        for (body, want) in cases {
            assert_eq!(error_of(body), *want, "{body}");
        }
        // Null members are the same as absent ones.
        assert!(
            parse_body("parallelism: null\nprofiles:\n- schedulerName: a\n  plugins: null\n")
                .is_ok()
        );
    }

    #[test]
    fn api_version_and_kind_are_checked() {
        let err = parse(
            b"apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\n",
        )
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(
            err.starts_with(
                "invalid configuration: kubescheduler.config.k8s.io/v1beta3 is no longer supported"
            ),
            "{err}"
        );
        let err =
            parse(b"apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeProxyConfiguration\n")
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
        assert!(
            err.starts_with(r#"invalid configuration: no kind "KubeProxyConfiguration" is registered for version "kubescheduler.config.k8s.io/v1""#),
            "{err}"
        );
        let err = parse(b"parallelism: 3\n")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.starts_with("invalid configuration: Object 'Kind' is missing"),
            "{err}"
        );
        let err = parse(b"").err().map(|e| e.to_string()).unwrap_or_default();
        assert_eq!(err, "invalid configuration: Object 'Kind' is missing in ''");
        let err = parse(b"kind: KubeSchedulerConfiguration\n")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.starts_with("invalid configuration: Object 'apiVersion' is missing"),
            "{err}"
        );
    }

    #[test]
    fn go_durations() {
        let cfg = parse_body("leaderElection:\n  leaseDuration: 1m30s\n  renewDeadline: 45.5s\n  retryPeriod: 500ms\n")
            .unwrap_or_else(|e| panic!("{e}"));
        let le = &cfg.leader_election;
        assert_eq!(
            le.lease_duration.to_std(),
            Some(std::time::Duration::from_secs(90))
        );
        assert_eq!(
            le.renew_deadline.to_std(),
            Some(std::time::Duration::from_millis(45_500))
        );
        assert_eq!(
            le.retry_period.to_std(),
            Some(std::time::Duration::from_millis(500))
        );
        assert_eq!(le.lease_duration.to_string(), "1m30s");
        assert_eq!(
            serde_json::to_value(le)
                .ok()
                .and_then(|v| v.get("renewDeadline").cloned()),
            Some(json!("45.5s"))
        );
        // A zero duration takes the default, as upstream.
        let cfg =
            parse_body("leaderElection:\n  leaseDuration: 0s\n").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            cfg.leader_election.lease_duration,
            GoDuration::from_secs(15)
        );
        for (value, message) in [
            ("15", r#"time: missing unit in duration "15""#),
            ("15 s", r#"time: unknown unit " s" in duration "15 s""#),
            ("1d", r#"time: unknown unit "d" in duration "1d""#),
        ] {
            let err = error_of(&format!("leaderElection:\n  leaseDuration: \"{value}\"\n"));
            assert!(err.ends_with(message), "{err}");
        }
        // A number is not a duration.
        let err = error_of("leaderElection:\n  leaseDuration: 15\n");
        assert!(
            err.contains("invalid type: integer `15`, expected a string"),
            "{err}"
        );
    }

    /// The cases of skiff-api's duration tests, run here too.
    #[test]
    fn go_duration_parser_and_printer() {
        use skiff_api::duration::{format_go_duration, parse_go_duration};
        const S: i64 = 1_000_000_000;
        for (input, want) in [
            ("0", 0),
            ("-5s", -5 * S),
            ("+5s", 5 * S),
            ("5.s", 5 * S),
            (".5s", S / 2),
            ("1.004s", S + 4_000_000),
            ("12µs", 12_000),
            ("3h30m", (3 * 3600 + 30 * 60) * S),
            (
                "1h2m3s4ms5us6ns",
                3600 * S + 2 * 60 * S + 3 * S + 4_000_000 + 5_000 + 6,
            ),
            ("0.3333333333333333333h", 20 * 60 * S),
            ("0.100000000000000000000h", 6 * 60 * S),
            ("9223372036854775807ns", i64::MAX),
            ("-9223372036854775808ns", i64::MIN),
        ] {
            assert_eq!(parse_go_duration(input), Ok(want), "{input}");
        }
        for (input, message) in [
            ("", r#"time: invalid duration """#),
            ("-", r#"time: invalid duration "-""#),
            (".", r#"time: invalid duration ".""#),
            ("+.s", r#"time: invalid duration "+.s""#),
            ("1m 2s", r#"time: unknown unit "m " in duration "1m 2s""#),
            (
                "9223372036854775808ns",
                r#"time: invalid duration "9223372036854775808ns""#,
            ),
            (
                "9223372036854775.808us",
                r#"time: invalid duration "9223372036854775.808us""#,
            ),
            ("3000000h", r#"time: invalid duration "3000000h""#),
        ] {
            assert_eq!(
                parse_go_duration(input).map_err(|e| e.to_string()),
                Err(message.to_owned()),
                "{input}"
            );
        }
        for (nanos, text) in [
            (0, "0s"),
            (1_100, "1.1µs"),
            (2_200_000, "2.2ms"),
            (60 * S, "1m0s"),
            (5 * 3600 * S + 6 * 60 * S + 7 * S + 1_000_000, "5h6m7.001s"),
            (8 * 3600 * S + 1, "8h0m0.000000001s"),
            (-15 * S, "-15s"),
            (i64::MIN, "-2562047h47m16.854775808s"),
        ] {
            assert_eq!(format_go_duration(nanos), text, "{nanos}");
            assert_eq!(parse_go_duration(text), Ok(nanos), "{text}");
        }
    }

    #[test]
    fn expansion_errors() {
        let cases: &[(&str, &str)] = &[
            (
                "profiles:\n- plugins:\n    multiPoint:\n      enabled:\n      - name: NoSuchPlugin\n",
                r#"invalid configuration: initializing profiles: creating profile for scheduler name default-scheduler: PreFilterPlugin "NoSuchPlugin" does not exist"#,
            ),
            (
                "profiles:\n- plugins:\n    filter:\n      enabled:\n      - name: PrioritySort\n",
                r#"invalid configuration: initializing profiles: creating profile for scheduler name default-scheduler: plugin "PrioritySort" does not extend FilterPlugin plugin"#,
            ),
            (
                "profiles:\n- plugins:\n    filter:\n      enabled:\n      - name: NodeName\n      - name: NodeName\n",
                r#"invalid configuration: initializing profiles: creating profile for scheduler name default-scheduler: plugin "NodeName" already registered as "FilterPlugin""#,
            ),
            (
                "profiles:\n- plugins:\n    multiPoint:\n      enabled:\n      - name: ImageLocality\n      - name: ImageLocality\n      disabled:\n      - name: '*'\n",
                r#"invalid configuration: initializing profiles: creating profile for scheduler name default-scheduler: plugin "ImageLocality" already registered as "ScorePlugin""#,
            ),
            (
                "profiles:\n- plugins:\n    multiPoint:\n      disabled:\n      - name: PrioritySort\n",
                r#"invalid configuration: initializing profiles: creating profile for scheduler name default-scheduler: only one queue sort plugin required for profile with scheduler name "default-scheduler", but got 0"#,
            ),
            (
                "profiles:\n- plugins:\n    bind:\n      disabled:\n      - name: DefaultBinder\n",
                r#"invalid configuration: initializing profiles: creating profile for scheduler name default-scheduler: at least one bind plugin is needed for profile with scheduler name "default-scheduler""#,
            ),
        ];
        for (body, want) in cases {
            assert_eq!(error_of(body), *want, "{body}");
        }
    }

    #[test]
    fn extension_point_table() {
        use ExtensionPoint::*;
        assert_eq!(extension_points_of("DefaultBinder"), Some(&[Bind][..]));
        assert_eq!(
            extension_points_of("VolumeBinding"),
            Some(&[PreFilter, Filter, PreScore, Score, Reserve, PreBind][..])
        );
        assert_eq!(extension_points_of("EBSLimits"), None);
        // Every default plugin is in the table.
        for p in defaults::default_plugins().multi_point.enabled {
            assert!(extension_points_of(&p.name).is_some(), "{}", p.name);
        }
    }

    #[test]
    fn extenders_are_refused() {
        let err = error_of(
            "extenders:\n- urlPrefix: http://127.0.0.1:8888/\n  filterVerb: filter\n  weight: 1\n",
        );
        assert!(
            err.starts_with("invalid configuration: extenders are not supported"),
            "{err}"
        );
    }
}
