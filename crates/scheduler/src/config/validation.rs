//! Validation of a defaulted KubeSchedulerConfiguration (upstream
//! `pkg/scheduler/apis/config/validation` `ValidateKubeSchedulerConfiguration` and
//! `validation_pluginargs.go`, component-base's client connection and leader election
//! validation), with upstream's field paths and messages.

use serde_json::Value;
use skiff_api::field::{FieldError, Path};
use skiff_api::meta::validate_label_name;

use super::types::{
    DefaultPreemptionArgs, GoDuration, InterPodAffinityArgs, KubeSchedulerConfiguration,
    KubeSchedulerProfile, LeaderElectionConfiguration, NodeAffinityArgs,
    NodeResourcesBalancedAllocationArgs, NodeResourcesFitArgs, PluginSet, PodTopologySpreadArgs,
    ResourceSpec, UtilizationShapePoint, VolumeBindingArgs,
};
use crate::error::Error;

/// client-go's leader election jitter (`JitterFactor`): the renew deadline must exceed
/// `retryPeriod * 1.2`.
const JITTER_FACTOR: f64 = 1.2;

/// Plugins removed from upstream, refused when enabled at a point or configured
/// (upstream `invalidPluginsByVersion`).
const REMOVED_PLUGINS: [&str; 4] = [
    "AzureDiskLimits",
    "CinderLimits",
    "EBSLimits",
    "GCEPDLimits",
];

/// Errors in the order found; printed as upstream's aggregate (one bare, several as
/// `[a, b]`, duplicates once).
#[derive(Default)]
struct Errors(Vec<String>);

impl Errors {
    fn field(&mut self, e: FieldError) {
        self.0.push(e.to_string());
    }

    fn fields(&mut self, errs: impl IntoIterator<Item = FieldError>) {
        errs.into_iter().for_each(|e| self.field(e));
    }

    /// `path: Invalid value: <duration>: detail` (Go prints durations bare, as `15s`).
    fn invalid_duration(&mut self, path: &Path, value: GoDuration, detail: &str) {
        self.0
            .push(format!("{path}: Invalid value: {value}: {detail}"));
    }

    fn into_result(self) -> Result<(), Error> {
        let mut seen = std::collections::BTreeSet::new();
        let unique: Vec<String> = self
            .0
            .into_iter()
            .filter(|e| seen.insert(e.clone()))
            .collect();
        match unique.as_slice() {
            [] => Ok(()),
            [one] => Err(Error::Config(one.clone())),
            many => Err(Error::Config(format!("[{}]", many.join(", ")))),
        }
    }
}

/// Validates a defaulted configuration (upstream `ValidateKubeSchedulerConfiguration`):
/// client connection, leader election (durations positive, `leaseDuration` >
/// `renewDeadline` > `retryPeriod * 1.2`, lock `leases`), `parallelism` > 0, profiles
/// with unique non-empty names, valid plugin args and the same QueueSort everywhere,
/// `percentageOfNodesToScore` in 0..=100, backoffs (initial > 0, max >= initial).
///
/// Errors: [`Error::Config`] with every problem (`profiles[1].schedulerName: Duplicate
/// value: "profiles[0].schedulerName"`), or `extenders are not supported` when the
/// configuration has extenders.
pub fn validate(cfg: &KubeSchedulerConfiguration) -> Result<(), Error> {
    if !cfg.extenders.is_empty() {
        return Err(Error::Config(
            "extenders are not supported: Skiff's scheduler calls no scheduler extenders \
             (remove `extenders`, or run kube-scheduler)"
                .into(),
        ));
    }
    let mut errs = Errors::default();

    let cc = Path::new("clientConnection");
    if cfg.client_connection.burst < 0 {
        errs.field(FieldError::invalid(
            &cc.child("burst"),
            cfg.client_connection.burst,
            "must be non-negative",
        ));
    }
    validate_leader_election(&cfg.leader_election, &mut errs);

    let parallelism = cfg
        .parallelism
        .unwrap_or(super::defaults::DEFAULT_PARALLELISM);
    if parallelism <= 0 {
        errs.field(FieldError::invalid(
            &Path::new("parallelism"),
            parallelism,
            "should be an integer value greater than zero",
        ));
    }

    let profiles = Path::new("profiles");
    if cfg.profiles.is_empty() {
        errs.field(FieldError::required(&profiles, ""));
    } else {
        let mut seen: Vec<(&str, usize)> = Vec::new();
        for (i, profile) in cfg.profiles.iter().enumerate() {
            let path = profiles.index(i);
            validate_profile(&path, profile, &mut errs);
            let name = profile.name();
            if let Some((_, first)) = seen.iter().find(|(n, _)| *n == name) {
                errs.field(FieldError::duplicate(
                    &path.child("schedulerName"),
                    profiles.index(*first).child("schedulerName").to_string(),
                ));
            }
            seen.push((name, i));
        }
        validate_common_queue_sort(&profiles, &cfg.profiles, &mut errs);
    }

    validate_percentage(
        &Path::new("percentageOfNodesToScore"),
        cfg.percentage_of_nodes_to_score,
        &mut errs,
    );

    let initial = cfg
        .pod_initial_backoff_seconds
        .unwrap_or(super::defaults::DEFAULT_POD_INITIAL_BACKOFF_SECONDS);
    let max = cfg
        .pod_max_backoff_seconds
        .unwrap_or(super::defaults::DEFAULT_POD_MAX_BACKOFF_SECONDS);
    if initial <= 0 {
        errs.field(FieldError::invalid(
            &Path::new("podInitialBackoffSeconds"),
            initial,
            "must be greater than 0",
        ));
    }
    if max < initial {
        errs.field(FieldError::invalid(
            &Path::new("podMaxBackoffSeconds"),
            max,
            "must be greater than or equal to PodInitialBackoffSeconds",
        ));
    }
    errs.into_result()
}

/// component-base `ValidateLeaderElectionConfiguration`, the `leases` lock rule, and
/// client-go's `renewDeadline > retryPeriod * JitterFactor` (upstream fails on it when
/// the elector starts).
fn validate_leader_election(le: &LeaderElectionConfiguration, errs: &mut Errors) {
    let path = Path::new("leaderElection");
    if !le.leader_elect() {
        return;
    }
    let lease = path.child("leaseDuration");
    let renew = path.child("renewDeadline");
    if le.lease_duration.nanos() <= 0 {
        errs.invalid_duration(&lease, le.lease_duration, "must be greater than zero");
    }
    if le.renew_deadline.nanos() <= 0 {
        errs.invalid_duration(&renew, le.renew_deadline, "must be greater than zero");
    }
    if le.retry_period.nanos() <= 0 {
        errs.invalid_duration(
            &path.child("retryPeriod"),
            le.retry_period,
            "must be greater than zero",
        );
    }
    if le.lease_duration <= le.renew_deadline {
        errs.invalid_duration(
            &lease,
            le.renew_deadline,
            "LeaseDuration must be greater than RenewDeadline",
        );
    }
    if le.retry_period.nanos() > 0
        && le.renew_deadline.nanos() > 0
        && (le.renew_deadline.nanos() as f64) <= JITTER_FACTOR * le.retry_period.nanos() as f64
    {
        errs.invalid_duration(
            &renew,
            le.renew_deadline,
            "renewDeadline must be greater than retryPeriod*JitterFactor",
        );
    }
    if le.resource_lock.is_empty() {
        errs.field(FieldError::invalid(
            &path.child("resourceLock"),
            "",
            "resourceLock is required",
        ));
    }
    if le.resource_namespace.is_empty() {
        errs.field(FieldError::invalid(
            &path.child("resourceNamespace"),
            "",
            "resourceNamespace is required",
        ));
    }
    if le.resource_name.is_empty() {
        errs.field(FieldError::invalid(
            &path.child("resourceName"),
            "",
            "resourceName is required",
        ));
    }
    if !le.resource_lock.is_empty() && le.resource_lock != "leases" {
        errs.field(FieldError::invalid(
            &path.child("resourceLock"),
            le.resource_lock.as_str(),
            r#"resourceLock value must be "leases""#,
        ));
    }
}

fn validate_percentage(path: &Path, value: Option<i32>, errs: &mut Errors) {
    if let Some(v) = value
        && !(0..=100).contains(&v)
    {
        errs.field(FieldError::invalid(path, v, "not in valid range [0-100]"));
    }
}

/// Upstream `validateKubeSchedulerProfile` and `validatePluginConfig`.
fn validate_profile(path: &Path, profile: &KubeSchedulerProfile, errs: &mut Errors) {
    if profile.name().is_empty() {
        errs.field(FieldError::required(&path.child("schedulerName"), ""));
    }
    validate_percentage(
        &path.child("percentageOfNodesToScore"),
        profile.percentage_of_nodes_to_score,
        errs,
    );
    if let Some(plugins) = &profile.plugins {
        let sets: [(&str, &PluginSet); 12] = [
            ("preEnqueue", &plugins.pre_enqueue),
            ("queueSort", &plugins.queue_sort),
            ("preFilter", &plugins.pre_filter),
            ("filter", &plugins.filter),
            ("postFilter", &plugins.post_filter),
            ("preScore", &plugins.pre_score),
            ("score", &plugins.score),
            ("reserve", &plugins.reserve),
            ("permit", &plugins.permit),
            ("preBind", &plugins.pre_bind),
            ("bind", &plugins.bind),
            ("postBind", &plugins.post_bind),
        ];
        for (stage, set) in sets {
            for (i, p) in set.enabled.iter().enumerate() {
                if REMOVED_PLUGINS.contains(&p.name.as_str()) {
                    errs.field(removed_plugin(
                        &path.child("plugins").child(stage).child("enabled").index(i),
                        &p.name,
                    ));
                }
            }
        }
    }
    let mut seen: Vec<&str> = Vec::new();
    for (i, pc) in profile.plugin_config.iter().enumerate() {
        let pc_path = path.child("pluginConfig").index(i);
        if seen.contains(&pc.name.as_str()) {
            errs.field(FieldError::duplicate(&pc_path, pc.name.as_str()));
        } else {
            seen.push(&pc.name);
        }
        if REMOVED_PLUGINS.contains(&pc.name.as_str()) {
            errs.field(removed_plugin(&pc_path, &pc.name));
            continue;
        }
        validate_args(&pc_path.child("args"), &pc.name, &pc.args, errs);
    }
}

fn removed_plugin(path: &Path, name: &str) -> FieldError {
    FieldError::invalid(
        path,
        name,
        format!(
            "was invalid in version \"v1\" (KubeSchedulerConfiguration is version {:?})",
            super::types::API_VERSION
        ),
    )
}

/// Decodes defaulted args as `T`; on failure, upstream's "has to match plugin args".
fn args_as<T: serde::de::DeserializeOwned>(
    path: &Path,
    args: &Value,
    errs: &mut Errors,
) -> Option<T> {
    let value = if args.is_null() {
        Value::Object(serde_json::Map::new())
    } else {
        args.clone()
    };
    match serde_json::from_value(value) {
        Ok(t) => Some(t),
        Err(_) => {
            errs.field(FieldError::invalid(
                path,
                args.clone(),
                "has to match plugin args",
            ));
            None
        }
    }
}

/// The in-tree plugin args checks of `validation_pluginargs.go`. NodeResourcesFit's are
/// checked here too (upstream checks them when the plugin is built).
fn validate_args(path: &Path, plugin: &str, args: &Value, errs: &mut Errors) {
    match plugin {
        "DefaultPreemption" => {
            if let Some(a) = args_as::<DefaultPreemptionArgs>(path, args, errs) {
                validate_default_preemption(path, &a, errs);
            }
        }
        "InterPodAffinity" => {
            if let Some(a) = args_as::<InterPodAffinityArgs>(path, args, errs) {
                let w = a.hard_pod_affinity_weight.unwrap_or(1);
                if !(0..=100).contains(&w) {
                    errs.field(FieldError::invalid(
                        &path.child("hardPodAffinityWeight"),
                        w,
                        "not in valid range [0, 100]",
                    ));
                }
            }
        }
        "NodeAffinity" => {
            // The selector terms are checked when the plugin parses them.
            let _ = args_as::<NodeAffinityArgs>(path, args, errs);
        }
        "NodeResourcesBalancedAllocation" => {
            if let Some(a) = args_as::<NodeResourcesBalancedAllocationArgs>(path, args, errs) {
                let resources = path.child("resources");
                let mut seen: Vec<&str> = Vec::new();
                for (i, r) in a.resources.iter().enumerate() {
                    if seen.contains(&r.name.as_str()) {
                        errs.field(FieldError::duplicate(
                            &resources.index(i).child("name"),
                            r.name.as_str(),
                        ));
                    } else {
                        seen.push(&r.name);
                    }
                    if r.weight != 1 {
                        errs.field(FieldError::invalid(
                            &resources.index(i).child("weight"),
                            r.weight,
                            "must be 1",
                        ));
                    }
                }
            }
        }
        "NodeResourcesFit" => {
            if let Some(a) = args_as::<NodeResourcesFitArgs>(path, args, errs) {
                validate_node_resources_fit(path, &a, errs);
            }
        }
        "PodTopologySpread" => {
            if let Some(a) = args_as::<PodTopologySpreadArgs>(path, args, errs) {
                validate_pod_topology_spread(path, &a, errs);
            }
        }
        "VolumeBinding" => {
            if let Some(a) = args_as::<VolumeBindingArgs>(path, args, errs) {
                let timeout = a.bind_timeout_seconds.unwrap_or(600);
                if timeout < 0 {
                    errs.field(FieldError::invalid(
                        &path.child("bindTimeoutSeconds"),
                        timeout,
                        "invalid BindTimeoutSeconds, should not be a negative value",
                    ));
                }
                if let Some(shape) = &a.shape {
                    errs.field(FieldError::invalid(
                        &path.child("shape"),
                        serde_json::to_value(shape).unwrap_or(Value::Null),
                        "unsupported when StorageCapacityScoring feature is disabled",
                    ));
                }
            }
        }
        _ => {}
    }
}

fn validate_default_preemption(path: &Path, a: &DefaultPreemptionArgs, errs: &mut Errors) {
    let pct_path = path.child("minCandidateNodesPercentage");
    let abs_path = path.child("minCandidateNodesAbsolute");
    let pct = a.min_candidate_nodes_percentage.unwrap_or(10);
    let abs = a.min_candidate_nodes_absolute.unwrap_or(100);
    if !(0..=100).contains(&pct) {
        errs.field(FieldError::invalid(
            &pct_path,
            pct,
            "not in valid range [0, 100]",
        ));
    }
    if abs < 0 {
        errs.field(FieldError::invalid(
            &abs_path,
            abs,
            "not in valid range [0, inf)",
        ));
    }
    if pct == 0 && abs == 0 {
        errs.field(FieldError::invalid(
            &pct_path,
            pct,
            "cannot be zero at the same time as minCandidateNodesAbsolute",
        ));
        errs.field(FieldError::invalid(
            &abs_path,
            abs,
            "cannot be zero at the same time as minCandidateNodesPercentage",
        ));
    }
}

fn validate_node_resources_fit(path: &Path, a: &NodeResourcesFitArgs, errs: &mut Errors) {
    let ignored = path.child("ignoredResources");
    for (i, r) in a.ignored_resources.iter().enumerate() {
        errs.fields(validate_label_name(r, &ignored.index(i)));
    }
    let groups = path.child("ignoredResourceGroups");
    for (i, g) in a.ignored_resource_groups.iter().enumerate() {
        let p = groups.index(i);
        if g.contains('/') {
            errs.field(FieldError::invalid(
                &p,
                g.as_str(),
                "resource group name can't contain '/'",
            ));
        }
        errs.fields(validate_label_name(g, &p));
    }
    if let Some(strategy) = &a.scoring_strategy {
        let sp = path.child("scoringStrategy");
        const TYPES: [&str; 3] = [
            "LeastAllocated",
            "MostAllocated",
            "RequestedToCapacityRatio",
        ];
        if !TYPES.contains(&strategy.type_.as_str()) {
            errs.field(FieldError::not_supported(
                &sp.child("type"),
                strategy.type_.as_str(),
                &TYPES,
            ));
        }
        validate_resources(&sp.child("resources"), &strategy.resources, errs);
        if let Some(rtc) = &strategy.requested_to_capacity_ratio {
            validate_function_shape(&sp.child("shape"), &rtc.shape, errs);
        }
    }
}

fn validate_resources(path: &Path, resources: &[ResourceSpec], errs: &mut Errors) {
    for (i, r) in resources.iter().enumerate() {
        if r.weight <= 0 || r.weight > 100 {
            errs.field(FieldError::invalid(
                &path.index(i).child("weight"),
                r.weight,
                format!("resource weight of {} not in valid range [1, 100]", r.name),
            ));
        }
    }
}

fn validate_function_shape(path: &Path, shape: &[UtilizationShapePoint], errs: &mut Errors) {
    if shape.is_empty() {
        errs.field(FieldError::required(
            path,
            "at least one point must be specified",
        ));
        return;
    }
    for (i, pair) in shape.windows(2).enumerate() {
        if let [prev, next] = pair
            && prev.utilization >= next.utilization
        {
            errs.field(FieldError::invalid(
                &path.index(i + 1).child("utilization"),
                next.utilization,
                "should be greater than prior element",
            ));
            break;
        }
    }
    for (i, point) in shape.iter().enumerate() {
        if !(0..=100).contains(&point.utilization) {
            errs.field(FieldError::invalid(
                &path.index(i).child("utilization"),
                point.utilization,
                "not in valid range [0, 100]",
            ));
        }
        if !(0..=10).contains(&point.score) {
            errs.field(FieldError::invalid(
                &path.index(i).child("score"),
                point.score,
                "not in valid range [0, 10]",
            ));
        }
    }
}

fn validate_pod_topology_spread(path: &Path, a: &PodTopologySpreadArgs, errs: &mut Errors) {
    let dt = path.child("defaultingType");
    match a.defaulting_type.as_str() {
        "System" if !a.default_constraints.is_empty() => errs.field(FieldError::invalid(
            &dt,
            "System",
            "when .defaultConstraints are not empty",
        )),
        "System" | "List" => {}
        other => errs.field(FieldError::not_supported(&dt, other, &["System", "List"])),
    }
    let dc = path.child("defaultConstraints");
    for (i, c) in a.default_constraints.iter().enumerate() {
        let p = dc.index(i);
        if c.max_skew <= 0 {
            errs.field(FieldError::invalid(
                &p.child("maxSkew"),
                c.max_skew,
                "not in valid range (0, inf)",
            ));
        }
        let key = p.child("topologyKey");
        if c.topology_key.is_empty() {
            errs.field(FieldError::required(&key, "can not be empty"));
        } else {
            errs.fields(validate_label_name(&c.topology_key, &key));
        }
        let when = p.child("whenUnsatisfiable");
        match c.when_unsatisfiable.as_str() {
            "" => errs.field(FieldError::required(&when, "can not be empty")),
            "DoNotSchedule" | "ScheduleAnyway" => {}
            other => errs.field(FieldError::not_supported(
                &when,
                other,
                &["DoNotSchedule", "ScheduleAnyway"],
            )),
        }
        if c.label_selector.is_some() {
            errs.field(FieldError::forbidden(
                &p.child("labelSelector"),
                "constraint must not define a selector, as they deduced for each pod",
            ));
        }
        let repeated = a.default_constraints[..i].iter().any(|o| {
            o.topology_key == c.topology_key && o.when_unsatisfiable == c.when_unsatisfiable
        });
        if repeated {
            errs.field(FieldError::duplicate(
                &dc.index(i),
                format!("{{{}, {}}}", c.topology_key, c.when_unsatisfiable),
            ));
        }
    }
}

/// Upstream `validateCommonQueueSort`: every profile's `queueSort` set (after merging
/// with the defaults) and the args of the first profile's QueueSort plugin must be the
/// first profile's.
fn validate_common_queue_sort(path: &Path, profiles: &[KubeSchedulerProfile], errs: &mut Errors) {
    let Some(first) = profiles.first() else {
        return;
    };
    let empty = PluginSet::default();
    let queue_sort = |p: &KubeSchedulerProfile| -> PluginSet {
        p.plugins
            .as_ref()
            .map_or_else(|| empty.clone(), |p| p.queue_sort.clone())
    };
    let canon = queue_sort(first);
    let name = canon
        .enabled
        .first()
        .map(|p| p.name.clone())
        .unwrap_or_default();
    if canon.enabled.len() > 1 {
        errs.field(FieldError::invalid(
            &path
                .index(0)
                .child("plugins")
                .child("queueSort")
                .child("Enabled"),
            canon.enabled.len(),
            "only one queue sort plugin can be enabled",
        ));
    }
    let args = first
        .plugin_config
        .iter()
        .filter(|pc| !name.is_empty() && pc.name == name)
        .map(|pc| &pc.args)
        .next_back();
    for (i, profile) in profiles.iter().enumerate().skip(1) {
        let current = queue_sort(profile);
        if current != canon {
            let mut value = serde_json::to_value(&current).unwrap_or(Value::Null);
            super::defaults::strip_nulls(&mut value);
            errs.field(FieldError::invalid(
                &path.index(i).child("plugins").child("queueSort"),
                value,
                "must be the same for all profiles",
            ));
        }
        for pc in &profile.plugin_config {
            if !name.is_empty() && pc.name == name && Some(&pc.args) != args {
                errs.field(FieldError::invalid(
                    &path.index(i).child("pluginConfig").child("args"),
                    pc.args.clone(),
                    "queueSort must be the same for all profiles",
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::parse;

    const HEADER: &str =
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n";

    fn error_of(body: &str) -> String {
        match parse(format!("{HEADER}{body}").as_bytes()) {
            Ok(_) => panic!("accepted: {body}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn every_validation_error() {
        let args = |plugin: &str, args: &str| {
            format!("profiles:\n- pluginConfig:\n  - name: {plugin}\n    args: {args}\n")
        };
        let cases: Vec<(String, &str)> = vec![
            ("parallelism: 0\n".into(), "parallelism: Invalid value: 0: should be an integer value greater than zero"),
            ("percentageOfNodesToScore: 101\n".into(), "percentageOfNodesToScore: Invalid value: 101: not in valid range [0-100]"),
            (
                "profiles:\n- percentageOfNodesToScore: -1\n".into(),
                "profiles[0].percentageOfNodesToScore: Invalid value: -1: not in valid range [0-100]",
            ),
            ("podInitialBackoffSeconds: 0\n".into(), "podInitialBackoffSeconds: Invalid value: 0: must be greater than 0"),
            (
                "podInitialBackoffSeconds: 5\npodMaxBackoffSeconds: 1\n".into(),
                "podMaxBackoffSeconds: Invalid value: 1: must be greater than or equal to PodInitialBackoffSeconds",
            ),
            ("clientConnection:\n  burst: -1\n".into(), "clientConnection.burst: Invalid value: -1: must be non-negative"),
            (
                "leaderElection:\n  leaseDuration: 10s\n".into(),
                "leaderElection.leaseDuration: Invalid value: 10s: LeaseDuration must be greater than RenewDeadline",
            ),
            (
                "leaderElection:\n  leaseDuration: -1s\n".into(),
                "[leaderElection.leaseDuration: Invalid value: -1s: must be greater than zero, leaderElection.leaseDuration: Invalid value: 10s: LeaseDuration must be greater than RenewDeadline]",
            ),
            (
                "leaderElection:\n  retryPeriod: -2s\n".into(),
                "leaderElection.retryPeriod: Invalid value: -2s: must be greater than zero",
            ),
            (
                "leaderElection:\n  renewDeadline: -1m\n".into(),
                "leaderElection.renewDeadline: Invalid value: -1m0s: must be greater than zero",
            ),
            (
                "leaderElection:\n  retryPeriod: 9s\n".into(),
                "leaderElection.renewDeadline: Invalid value: 10s: renewDeadline must be greater than retryPeriod*JitterFactor",
            ),
            (
                "leaderElection:\n  resourceLock: endpoints\n".into(),
                r#"leaderElection.resourceLock: Invalid value: "endpoints": resourceLock value must be "leases""#,
            ),
            (
                "profiles:\n- schedulerName: a\n- schedulerName: a\n".into(),
                r#"profiles[1].schedulerName: Duplicate value: "profiles[0].schedulerName""#,
            ),
            ("profiles:\n- schedulerName: a\n- {}\n".into(), "profiles[1].schedulerName: Required value"),
            ("profiles:\n- schedulerName: ''\n".into(), "profiles[0].schedulerName: Required value"),
            (
                "profiles:\n- schedulerName: a\n- schedulerName: b\n  plugins:\n    queueSort:\n      enabled:\n      - name: PrioritySort\n".into(),
                r#"profiles[1].plugins.queueSort: Invalid value: {"disabled":[],"enabled":[{"name":"PrioritySort"}]}: must be the same for all profiles"#,
            ),
            (
                "profiles:\n- schedulerName: a\n  plugins:\n    queueSort:\n      enabled:\n      - name: PrioritySort\n      - name: Other\n".into(),
                "profiles[0].plugins.queueSort.Enabled: Invalid value: 2: only one queue sort plugin can be enabled",
            ),
            (
                "profiles:\n- schedulerName: a\n  plugins:\n    queueSort:\n      enabled:\n      - name: PrioritySort\n- schedulerName: b\n  plugins:\n    queueSort:\n      enabled:\n      - name: PrioritySort\n  pluginConfig:\n  - name: PrioritySort\n    args:\n      x: 1\n".into(),
                r#"profiles[1].pluginConfig.args: Invalid value: {"x":1}: queueSort must be the same for all profiles"#,
            ),
            (
                "profiles:\n- pluginConfig:\n  - name: NodeAffinity\n  - name: NodeAffinity\n".into(),
                r#"profiles[0].pluginConfig[1]: Duplicate value: "NodeAffinity""#,
            ),
            (
                "profiles:\n- plugins:\n    filter:\n      enabled:\n      - name: EBSLimits\n".into(),
                r#"profiles[0].plugins.filter.enabled[0]: Invalid value: "EBSLimits": was invalid in version "v1" (KubeSchedulerConfiguration is version "kubescheduler.config.k8s.io/v1")"#,
            ),
            (
                args("DefaultPreemption", "{minCandidateNodesPercentage: 101}"),
                "profiles[0].pluginConfig[0].args.minCandidateNodesPercentage: Invalid value: 101: not in valid range [0, 100]",
            ),
            (
                args("DefaultPreemption", "{minCandidateNodesAbsolute: -1}"),
                "profiles[0].pluginConfig[0].args.minCandidateNodesAbsolute: Invalid value: -1: not in valid range [0, inf)",
            ),
            (
                args("DefaultPreemption", "{minCandidateNodesPercentage: 0, minCandidateNodesAbsolute: 0}"),
                "[profiles[0].pluginConfig[0].args.minCandidateNodesPercentage: Invalid value: 0: cannot be zero at the same time as minCandidateNodesAbsolute, profiles[0].pluginConfig[0].args.minCandidateNodesAbsolute: Invalid value: 0: cannot be zero at the same time as minCandidateNodesPercentage]",
            ),
            (
                args("InterPodAffinity", "{hardPodAffinityWeight: 101}"),
                "profiles[0].pluginConfig[0].args.hardPodAffinityWeight: Invalid value: 101: not in valid range [0, 100]",
            ),
            (
                args("NodeResourcesBalancedAllocation", "{resources: [{name: cpu, weight: 2}, {name: cpu}]}"),
                r#"[profiles[0].pluginConfig[0].args.resources[0].weight: Invalid value: 2: must be 1, profiles[0].pluginConfig[0].args.resources[1].name: Duplicate value: "cpu"]"#,
            ),
            (
                args("NodeResourcesFit", "{scoringStrategy: {type: Spread}}"),
                r#"profiles[0].pluginConfig[0].args.scoringStrategy.type: Unsupported value: "Spread": supported values: "LeastAllocated", "MostAllocated", "RequestedToCapacityRatio""#,
            ),
            (
                args("NodeResourcesFit", "{scoringStrategy: {type: MostAllocated, resources: [{name: cpu, weight: 101}]}}"),
                "profiles[0].pluginConfig[0].args.scoringStrategy.resources[0].weight: Invalid value: 101: resource weight of cpu not in valid range [1, 100]",
            ),
            (
                args("NodeResourcesFit", "{scoringStrategy: {type: RequestedToCapacityRatio, requestedToCapacityRatio: {shape: [{utilization: 50, score: 11}, {utilization: 50, score: 1}]}}}"),
                "[profiles[0].pluginConfig[0].args.scoringStrategy.shape[1].utilization: Invalid value: 50: should be greater than prior element, profiles[0].pluginConfig[0].args.scoringStrategy.shape[0].score: Invalid value: 11: not in valid range [0, 10]]",
            ),
            (
                args("NodeResourcesFit", "{scoringStrategy: {type: RequestedToCapacityRatio, requestedToCapacityRatio: {}}}"),
                "profiles[0].pluginConfig[0].args.scoringStrategy.shape: Required value: at least one point must be specified",
            ),
            (
                args("NodeResourcesFit", "{ignoredResourceGroups: [example.com/gpu]}"),
                r#"profiles[0].pluginConfig[0].args.ignoredResourceGroups[0]: Invalid value: "example.com/gpu": resource group name can't contain '/'"#,
            ),
            (
                args("PodTopologySpread", "{defaultConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}]}"),
                r#"profiles[0].pluginConfig[0].args.defaultingType: Invalid value: "System": when .defaultConstraints are not empty"#,
            ),
            (
                args("PodTopologySpread", "{defaultingType: Auto}"),
                r#"profiles[0].pluginConfig[0].args.defaultingType: Unsupported value: "Auto": supported values: "System", "List""#,
            ),
            (
                args("PodTopologySpread", "{defaultingType: List, defaultConstraints: [{maxSkew: 0, topologyKey: '', whenUnsatisfiable: Sometimes, labelSelector: {}}, {maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}, {maxSkew: 2, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}]}"),
                r#"[profiles[0].pluginConfig[0].args.defaultConstraints[0].maxSkew: Invalid value: 0: not in valid range (0, inf), profiles[0].pluginConfig[0].args.defaultConstraints[0].topologyKey: Required value: can not be empty, profiles[0].pluginConfig[0].args.defaultConstraints[0].whenUnsatisfiable: Unsupported value: "Sometimes": supported values: "DoNotSchedule", "ScheduleAnyway", profiles[0].pluginConfig[0].args.defaultConstraints[0].labelSelector: Forbidden: constraint must not define a selector, as they deduced for each pod, profiles[0].pluginConfig[0].args.defaultConstraints[2]: Duplicate value: "{zone, DoNotSchedule}"]"#,
            ),
            (
                args("VolumeBinding", "{bindTimeoutSeconds: -1}"),
                "profiles[0].pluginConfig[0].args.bindTimeoutSeconds: Invalid value: -1: invalid BindTimeoutSeconds, should not be a negative value",
            ),
            (
                args("VolumeBinding", "{shape: [{utilization: 0, score: 0}]}"),
                r#"profiles[0].pluginConfig[0].args.shape: Invalid value: [{"score":0,"utilization":0}]: unsupported when StorageCapacityScoring feature is disabled"#,
            ),
        ];
        for (body, want) in &cases {
            assert_eq!(
                error_of(body),
                format!("invalid configuration: {want}"),
                "{body}"
            );
        }
    }

    #[test]
    fn valid_configurations_pass() {
        for body in [
            "",
            "leaderElection:\n  leaderElect: false\n  leaseDuration: -1s\n  resourceLock: endpoints\n",
            "percentageOfNodesToScore: 100\nprofiles:\n- schedulerName: a\n  percentageOfNodesToScore: 0\n- schedulerName: b\n",
            "podInitialBackoffSeconds: 3\npodMaxBackoffSeconds: 3\n",
            "profiles:\n- pluginConfig:\n  - name: PodTopologySpread\n    args:\n      defaultingType: List\n      defaultConstraints:\n      - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}\n",
        ] {
            if let Err(e) = parse(format!("{HEADER}{body}").as_bytes()) {
                panic!("{body}: {e}");
            }
        }
    }
}
