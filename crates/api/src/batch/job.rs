//! Jobs: `SetDefaults_Job`, the generated selector of the job strategy, `ValidateJob`,
//! `ValidateJobUpdate` and the status counts.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::batch::v1::{Job, JobSpec, JobStatus, SuccessPolicy, SuccessPolicyRule};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::core::pod;
use crate::field::{ErrorList, FieldError, Path};
use crate::selector::LabelSelector as Selector;
use crate::validation::{immutable, json, nonnegative_opt};
use crate::{meta, validation};

/// The label every pod of a job carries, selected by the generated selector.
pub const CONTROLLER_UID_LABEL: &str = "batch.kubernetes.io/controller-uid";
/// The job's name on its pods.
pub const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";
/// Upstream's pre-1.27 names of the two labels, still set.
pub const LEGACY_CONTROLLER_UID_LABEL: &str = "controller-uid";
pub const LEGACY_JOB_NAME_LABEL: &str = "job-name";

/// Upstream's limit on completions and parallelism of an Indexed job.
const MAX_INDEXED: i32 = 100_000;
/// Upstream's limit on `maxFailedIndexes` (`maxFailedIndexesForIndexedJob`).
const MAX_FAILED_INDEXES: i32 = 100_000;
/// The most rules a `podFailurePolicy` may have (`maxPodFailurePolicyRules`).
const MAX_POD_FAILURE_POLICY_RULES: usize = 20;
/// The actions of `podFailurePolicy` rules (`supportedPodFailurePolicyActions`).
const POD_FAILURE_POLICY_ACTIONS: [&str; 4] = ["Count", "FailIndex", "FailJob", "Ignore"];
/// The most rules a `successPolicy` may have (`maxSuccessPolicyRule`).
const MAX_SUCCESS_POLICY_RULES: usize = 20;
/// The longest `succeededIndexes` of a success policy rule
/// (`maxJobSuccessPolicySucceededIndexesLimit`).
const MAX_SUCCEEDED_INDEXES_LEN: usize = 64 * 1024;

/// completions and parallelism 1 (parallelism alone 1 when completions is set),
/// backoffLimit 6 (2147483647 with backoffLimitPerIndex), the template's labels as the
/// job's when it has none, completionMode NonIndexed, suspend false, podFailurePolicy
/// condition status True, podReplacementPolicy TerminatingOrFailed (Failed with a
/// podFailurePolicy); pod template defaults.
pub fn default(job: &mut Job) {
    let spec = job.spec.get_or_insert_with(Default::default);
    default_spec(spec);
    let template_labels = spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone());
    if template_labels.is_some() && job.metadata.labels.as_ref().is_none_or(BTreeMap::is_empty) {
        job.metadata.labels = template_labels;
    }
}

/// The defaults of a job spec (also a cronjob's job template).
fn default_spec(spec: &mut JobSpec) {
    if spec.completions.is_none() && spec.parallelism.is_none() {
        spec.completions = Some(1);
    }
    spec.parallelism.get_or_insert(1);
    if spec.backoff_limit.is_none() {
        spec.backoff_limit = Some(if spec.backoff_limit_per_index.is_some() {
            i32::MAX
        } else {
            6
        });
    }
    spec.completion_mode
        .get_or_insert_with(|| "NonIndexed".to_owned());
    spec.suspend.get_or_insert(false);
    if let Some(policy) = &mut spec.pod_failure_policy {
        for pattern in policy
            .rules
            .iter_mut()
            .flat_map(|r| r.on_pod_conditions.iter_mut().flatten())
        {
            if pattern.status.as_deref().is_none_or(str::is_empty) {
                pattern.status = Some("True".to_owned());
            }
        }
    }
    if spec.pod_replacement_policy.is_none() {
        let policy = if spec.pod_failure_policy.is_some() {
            "Failed"
        } else {
            "TerminatingOrFailed"
        };
        spec.pod_replacement_policy = Some(policy.to_owned());
    }
    pod::default_pod_spec(spec.template.spec.get_or_insert_with(Default::default));
}

/// Unless `spec.manualSelector`, labels the pod template with the job's name and uid and
/// selects the uid (upstream's job strategy, `generateSelector`). Needs
/// `metadata.name` and `metadata.uid`; labels the user set are kept (validation rejects
/// wrong ones).
pub fn generate_selector(job: &mut Job) {
    let name = job.metadata.name.clone().unwrap_or_default();
    let uid = job.metadata.uid.clone().unwrap_or_default();
    let spec = job.spec.get_or_insert_with(Default::default);
    if spec.manual_selector == Some(true) {
        return;
    }
    let labels = spec
        .template
        .metadata
        .get_or_insert_with(Default::default)
        .labels
        .get_or_insert_with(Default::default);
    for key in [LEGACY_JOB_NAME_LABEL, JOB_NAME_LABEL] {
        labels.entry(key.to_owned()).or_insert_with(|| name.clone());
    }
    for key in [LEGACY_CONTROLLER_UID_LABEL, CONTROLLER_UID_LABEL] {
        labels.entry(key.to_owned()).or_insert_with(|| uid.clone());
    }
    spec.selector
        .get_or_insert_with(Default::default)
        .match_labels
        .get_or_insert_with(Default::default)
        .entry(CONTROLLER_UID_LABEL.to_owned())
        .or_insert(uid);
}

/// `ValidateJob` (metadata excepted): the generated selector, then the spec.
pub fn validate(job: &Job) -> ErrorList {
    let path = Path::new("spec");
    let Some(spec) = &job.spec else {
        return vec![FieldError::required(&path, "")];
    };
    let mut errors = Vec::new();
    if spec.manual_selector != Some(true)
        && let Some(selector) = &spec.selector
    {
        let uid = job.metadata.uid.clone().unwrap_or_default();
        let generated = [(CONTROLLER_UID_LABEL.to_owned(), uid)].into();
        if Selector::from_meta(selector).is_ok_and(|s| !s.matches(&generated)) {
            errors.push(FieldError::invalid(
                &path.child("selector"),
                json(selector),
                "`selector` not auto-generated",
            ));
        }
    }
    errors.extend(validate_spec_fields(spec, &path));
    match &spec.selector {
        None => errors.push(FieldError::required(&path.child("selector"), "")),
        Some(selector) => {
            errors.extend(meta::validate_label_selector(
                selector,
                &path.child("selector"),
            ));
            let labels = spec
                .template
                .metadata
                .as_ref()
                .and_then(|m| m.labels.clone())
                .unwrap_or_default();
            if Selector::from_meta(selector).is_ok_and(|s| !s.matches(&labels)) {
                errors.push(FieldError::invalid(
                    &path.child("template").child("metadata").child("labels"),
                    json(&labels),
                    "`selector` does not match template `labels`",
                ));
            }
        }
    }
    errors
}

/// `validateJobSpec`: the rules a job and a cronjob's job template share.
pub fn validate_spec_fields(spec: &JobSpec, path: &Path) -> ErrorList {
    let mut errors = Vec::new();
    errors.extend(nonnegative_opt(
        spec.parallelism,
        &path.child("parallelism"),
    ));
    errors.extend(nonnegative_opt(
        spec.completions,
        &path.child("completions"),
    ));
    errors.extend(nonnegative_opt(
        spec.active_deadline_seconds,
        &path.child("activeDeadlineSeconds"),
    ));
    errors.extend(nonnegative_opt(
        spec.backoff_limit,
        &path.child("backoffLimit"),
    ));
    errors.extend(nonnegative_opt(
        spec.ttl_seconds_after_finished,
        &path.child("ttlSecondsAfterFinished"),
    ));
    let indexed = spec.completion_mode.as_deref() == Some("Indexed");
    if let Some(per_index) = spec.backoff_limit_per_index {
        let at = path.child("backoffLimitPerIndex");
        errors.extend(validation::nonnegative(per_index.into(), &at));
        if !indexed {
            errors.push(FieldError::invalid(
                &at,
                per_index,
                "requires indexed completion mode",
            ));
        }
    }
    if let Some(max_failed) = spec.max_failed_indexes {
        let at = path.child("maxFailedIndexes");
        errors.extend(validation::nonnegative(max_failed.into(), &at));
        if spec.backoff_limit_per_index.is_none() {
            errors.push(FieldError::required(
                &path.child("backoffLimitPerIndex"),
                "when maxFailedIndexes is specified",
            ));
        }
        if !indexed {
            errors.push(FieldError::invalid(
                &at,
                max_failed,
                "requires indexed completion mode",
            ));
        } else {
            if spec.completions.is_some_and(|c| max_failed > c) {
                errors.push(FieldError::invalid(
                    &at,
                    max_failed,
                    "must be less than or equal to completions",
                ));
            }
            if max_failed > MAX_FAILED_INDEXES {
                errors.push(FieldError::invalid(
                    &at,
                    max_failed,
                    format!("must be less than or equal to {MAX_FAILED_INDEXES}"),
                ));
            }
        }
    }
    if let Some(mode) = spec.completion_mode.as_deref() {
        if !matches!(mode, "NonIndexed" | "Indexed") {
            errors.push(FieldError::not_supported(
                &path.child("completionMode"),
                mode,
                &["NonIndexed", "Indexed"],
            ));
        }
        if indexed {
            match spec.completions {
                None => errors.push(FieldError::required(
                    &path.child("completions"),
                    "when completion mode is Indexed",
                )),
                Some(c) if c > MAX_INDEXED => errors.push(FieldError::invalid(
                    &path.child("completions"),
                    c,
                    format!("must be less than or equal to {MAX_INDEXED} when completion mode is Indexed"),
                )),
                Some(_) => {}
            }
            if let Some(p) = spec.parallelism.filter(|p| *p > MAX_INDEXED) {
                errors.push(FieldError::invalid(
                    &path.child("parallelism"),
                    p,
                    format!("must be less than or equal to {MAX_INDEXED} when completion mode is Indexed"),
                ));
            }
        }
    }
    if let Some(policy) = &spec.pod_failure_policy {
        errors.extend(validate_pod_failure_policy_actions(
            spec,
            &policy.rules,
            &path.child("podFailurePolicy").child("rules"),
        ));
    }
    if let Some(policy) = &spec.success_policy {
        let at = path.child("successPolicy");
        if indexed {
            errors.extend(validate_success_policy(
                policy,
                spec.completions.unwrap_or(0),
                &at,
            ));
        } else {
            errors.push(FieldError::invalid(
                &at,
                json(policy),
                "requires indexed completion mode",
            ));
        }
    }
    if let Some(policy) = spec.pod_replacement_policy.as_deref() {
        let at = path.child("podReplacementPolicy");
        if spec.pod_failure_policy.is_some() && policy != "Failed" {
            errors.push(FieldError::not_supported(&at, policy, &["Failed"]));
        } else if !matches!(policy, "Failed" | "TerminatingOrFailed") {
            errors.push(FieldError::not_supported(
                &at,
                policy,
                &["Failed", "TerminatingOrFailed"],
            ));
        }
    }
    let template_path = path.child("template");
    errors.extend(pod::validate_pod_template_spec(
        &spec.template,
        &template_path,
    ));
    let restart_path = template_path.child("spec").child("restartPolicy");
    match spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("")
    {
        "" | "Always" => errors.push(FieldError::required(
            &restart_path,
            r#"valid values: "OnFailure", "Never""#,
        )),
        "OnFailure" | "Never" => {}
        other => errors.push(FieldError::not_supported(
            &restart_path,
            other,
            &["OnFailure", "Never"],
        )),
    }
    errors
}

/// The number of `podFailurePolicy` rules and their actions (upstream
/// `validatePodFailurePolicy` and the action part of `validatePodFailurePolicyRule`):
/// `FailIndex` needs `backoffLimitPerIndex`.
fn validate_pod_failure_policy_actions(
    spec: &JobSpec,
    rules: &[k8s_openapi::api::batch::v1::PodFailurePolicyRule],
    path: &Path,
) -> ErrorList {
    let mut errors = Vec::new();
    if rules.len() > MAX_POD_FAILURE_POLICY_RULES {
        errors.push(FieldError::too_many(
            path,
            rules.len(),
            MAX_POD_FAILURE_POLICY_RULES,
        ));
    }
    for (i, rule) in rules.iter().enumerate() {
        let at = path.index(i).child("action");
        match rule.action.as_str() {
            "" => errors.push(FieldError::required(
                &at,
                format!(
                    "valid values: [{}]",
                    POD_FAILURE_POLICY_ACTIONS
                        .iter()
                        .map(|a| format!("{a:?}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                ),
            )),
            "FailIndex" if spec.backoff_limit_per_index.is_none() => {
                errors.push(FieldError::invalid(
                    &at,
                    rule.action.as_str(),
                    "requires the backoffLimitPerIndex to be set",
                ));
            }
            a if POD_FAILURE_POLICY_ACTIONS.contains(&a) => {}
            a => errors.push(FieldError::not_supported(
                &at,
                a,
                &POD_FAILURE_POLICY_ACTIONS,
            )),
        }
    }
    errors
}

/// `validateSuccessPolicy` of an Indexed job with `completions`: one to 20 rules, each
/// with `succeededIndexes` (well formed, below `completions`) or `succeededCount` (at
/// most `completions`, and at most the indexes it counts among).
fn validate_success_policy(policy: &SuccessPolicy, completions: i32, path: &Path) -> ErrorList {
    let mut errors = Vec::new();
    let rules_path = path.child("rules");
    if policy.rules.is_empty() {
        errors.push(FieldError::required(
            &rules_path,
            "at least one rules must be specified when the successPolicy is specified",
        ));
    }
    if policy.rules.len() > MAX_SUCCESS_POLICY_RULES {
        errors.push(FieldError::too_many(
            &rules_path,
            policy.rules.len(),
            MAX_SUCCESS_POLICY_RULES,
        ));
    }
    for (i, rule) in policy.rules.iter().enumerate() {
        errors.extend(validate_success_policy_rule(
            rule,
            completions,
            &rules_path.index(i),
        ));
    }
    errors
}

/// `validateSuccessPolicyRule`.
fn validate_success_policy_rule(
    rule: &SuccessPolicyRule,
    completions: i32,
    path: &Path,
) -> ErrorList {
    let mut errors = Vec::new();
    if rule.succeeded_count.is_none() && rule.succeeded_indexes.is_none() {
        errors.push(FieldError::required(
            path,
            "at least one of succeededCount or succeededIndexes must be specified",
        ));
    }
    let mut total = 0;
    if let Some(indexes) = &rule.succeeded_indexes {
        let at = path.child("succeededIndexes");
        if indexes.len() > MAX_SUCCEEDED_INDEXES_LEN {
            errors.push(FieldError::too_long(&at, MAX_SUCCEEDED_INDEXES_LEN));
        }
        match validate_indexes_format(indexes, completions) {
            Ok(n) => total = n,
            Err(e) => errors.push(FieldError::invalid(
                &at,
                indexes.as_str(),
                format!("error parsing succeededIndexes: {e}"),
            )),
        }
    }
    if let Some(count) = rule.succeeded_count {
        let at = path.child("succeededCount");
        errors.extend(validation::nonnegative(count.into(), &at));
        if count > completions {
            errors.push(FieldError::invalid(
                &at,
                count,
                format!(
                    "must be less than or equal to {completions} (the number of specified \
                     completions)"
                ),
            ));
        }
        if rule.succeeded_indexes.is_some() && i64::from(count) > total {
            errors.push(FieldError::invalid(
                &at,
                count,
                format!(
                    "must be less than or equal to {total} (the number of indexes in the \
                     specified succeededIndexes field)"
                ),
            ));
        }
    }
    errors
}

/// Why an index list such as `"1,3-5"` is malformed (the errors of upstream
/// `validateIndexesFormat`).
#[derive(Debug, Clone, PartialEq, Eq)]
enum IndexesError {
    /// An interval with more than one `-`.
    TooManyParts(String),
    /// A bound that is no integer.
    NotAnInteger(String),
    /// A bound at or past `completions`.
    TooLarge(String),
    /// A bound not above the one before it.
    NonIncreasing { previous: i64, current: i64 },
}

impl fmt::Display for IndexesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooManyParts(s) => write!(
                f,
                "the fragment {s:?} violates the requirement that an index interval can have \
                 at most two parts separated by '-'"
            ),
            Self::NotAnInteger(s) => write!(f, "cannot convert string to integer for index: {s:?}"),
            Self::TooLarge(s) => write!(f, "too large index: {s:?}"),
            Self::NonIncreasing { previous, current } => write!(
                f,
                "non-increasing order, previous: {previous}, current: {current}"
            ),
        }
    }
}

/// The number of indexes of a well-formed, increasing list of indexes and intervals
/// below `completions` (upstream `validateIndexesFormat`, `parseIndexInterval`); the
/// empty list has none.
fn validate_indexes_format(indexes: &str, completions: i32) -> Result<i64, IndexesError> {
    if indexes.is_empty() {
        return Ok(0);
    }
    let bound = |s: &str| -> Result<i64, IndexesError> {
        let n: i64 = s
            .parse()
            .map_err(|_| IndexesError::NotAnInteger(s.to_owned()))?;
        if n >= i64::from(completions) {
            return Err(IndexesError::TooLarge(s.to_owned()));
        }
        Ok(n)
    };
    let mut last: Option<i64> = None;
    let mut total = 0;
    for interval in indexes.split(',') {
        let parts: Vec<&str> = interval.split('-').collect();
        let (first, end) = match parts.as_slice() {
            [one] => {
                let x = bound(one)?;
                (x, x)
            }
            [a, b] => {
                let (x, y) = (bound(a)?, bound(b)?);
                if x >= y {
                    return Err(IndexesError::NonIncreasing {
                        previous: x,
                        current: y,
                    });
                }
                (x, y)
            }
            _ => return Err(IndexesError::TooManyParts(interval.to_owned())),
        };
        if let Some(previous) = last
            && previous >= first
        {
            return Err(IndexesError::NonIncreasing {
                previous,
                current: first,
            });
        }
        total += end - first + 1;
        last = Some(end);
    }
    Ok(total)
}

/// `ValidateJobUpdate`: the new job, then immutable selector, completionMode,
/// podFailurePolicy, backoffLimitPerIndex, managedBy, successPolicy, completions (but for
/// Indexed jobs scaling completions with parallelism) and template (but while suspended
/// before starting); the status counts.
pub fn validate_update(new: &Job, old: &Job) -> ErrorList {
    let mut errors = validate(new);
    let path = Path::new("spec");
    let default = JobSpec::default();
    let (spec, old_spec) = (
        new.spec.as_ref().unwrap_or(&default),
        old.spec.as_ref().unwrap_or(&default),
    );
    let elastic = spec.completion_mode.as_deref() == Some("Indexed")
        && spec.completions == spec.parallelism
        && old_spec.completions == old_spec.parallelism;
    if !elastic {
        errors.extend(immutable(
            &spec.completions,
            &old_spec.completions,
            &path.child("completions"),
        ));
    }
    errors.extend(immutable::<Option<LabelSelector>>(
        &spec.selector,
        &old_spec.selector,
        &path.child("selector"),
    ));
    let suspended_before_start = old_spec.suspend == Some(true)
        && old.status.as_ref().is_none_or(|s| s.start_time.is_none());
    if !suspended_before_start {
        errors.extend(immutable(
            &spec.template,
            &old_spec.template,
            &path.child("template"),
        ));
    }
    errors.extend(immutable(
        &spec.completion_mode,
        &old_spec.completion_mode,
        &path.child("completionMode"),
    ));
    errors.extend(immutable(
        &spec.pod_failure_policy,
        &old_spec.pod_failure_policy,
        &path.child("podFailurePolicy"),
    ));
    errors.extend(immutable(
        &spec.backoff_limit_per_index,
        &old_spec.backoff_limit_per_index,
        &path.child("backoffLimitPerIndex"),
    ));
    errors.extend(immutable(
        &spec.managed_by,
        &old_spec.managed_by,
        &path.child("managedBy"),
    ));
    errors.extend(immutable(
        &spec.success_policy,
        &old_spec.success_policy,
        &path.child("successPolicy"),
    ));
    errors.extend(validate_status(new.status.as_ref()));
    errors
}

/// The status counts are non-negative.
pub fn validate_status(status: Option<&JobStatus>) -> ErrorList {
    let path = Path::new("status");
    let Some(status) = status else {
        return Vec::new();
    };
    [
        ("active", status.active),
        ("succeeded", status.succeeded),
        ("failed", status.failed),
        ("ready", status.ready),
        ("terminating", status.terminating),
    ]
    .into_iter()
    .flat_map(|(name, value)| nonnegative_opt(value, &path.child(name)))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job() -> Job {
        serde_json::from_value(json!({
            "metadata": {"name": "pi", "uid": "u-1"},
            "spec": {"template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "pi", "image": "perl"}],
            }}},
        }))
        .unwrap()
    }

    #[test]
    fn defaults_match_upstream() {
        let mut j = job();
        default(&mut j);
        let spec = serde_json::to_value(&j.spec).unwrap();
        assert_eq!(spec["completions"], 1);
        assert_eq!(spec["parallelism"], 1);
        assert_eq!(spec["backoffLimit"], 6);
        assert_eq!(spec["completionMode"], "NonIndexed");
        assert_eq!(spec["suspend"], false);
        assert_eq!(spec["podReplacementPolicy"], "TerminatingOrFailed");
        let mut parallel = job();
        parallel.spec.as_mut().unwrap().parallelism = Some(3);
        default(&mut parallel);
        assert_eq!(parallel.spec.unwrap().completions, None);
    }

    #[test]
    fn generated_selector_labels_the_template() {
        let mut j = job();
        default(&mut j);
        generate_selector(&mut j);
        let spec = serde_json::to_value(&j.spec).unwrap();
        assert_eq!(
            spec["selector"],
            json!({"matchLabels": {CONTROLLER_UID_LABEL: "u-1"}})
        );
        assert_eq!(
            spec["template"]["metadata"]["labels"],
            json!({
                CONTROLLER_UID_LABEL: "u-1",
                JOB_NAME_LABEL: "pi",
                LEGACY_CONTROLLER_UID_LABEL: "u-1",
                LEGACY_JOB_NAME_LABEL: "pi",
            })
        );
        assert_eq!(validate(&j), Vec::new());
    }

    #[test]
    fn restart_policy_always_is_rejected() {
        let mut j = job();
        j.spec
            .as_mut()
            .unwrap()
            .template
            .spec
            .as_mut()
            .unwrap()
            .restart_policy = None;
        default(&mut j);
        generate_selector(&mut j);
        let errors: Vec<String> = validate(&j).iter().map(ToString::to_string).collect();
        assert_eq!(
            errors,
            [
                r#"spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never""#
            ]
        );
    }

    #[test]
    fn foreign_selector_is_not_auto_generated() {
        let mut j = job();
        default(&mut j);
        j.spec.as_mut().unwrap().selector = Some(LabelSelector {
            match_labels: Some([("app".to_owned(), "x".to_owned())].into()),
            ..Default::default()
        });
        generate_selector(&mut j);
        let errors: Vec<String> = validate(&j).iter().map(ToString::to_string).collect();
        assert!(
            errors[0].ends_with("`selector` not auto-generated"),
            "{errors:?}"
        );
    }

    #[test]
    fn template_is_immutable_once_running() {
        let mut old = job();
        default(&mut old);
        generate_selector(&mut old);
        let mut new = old.clone();
        new.spec
            .as_mut()
            .unwrap()
            .template
            .spec
            .as_mut()
            .unwrap()
            .containers[0]
            .image = Some("perl:5".into());
        let errors: Vec<String> = validate_update(&new, &old)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(errors.len(), 1);
        assert!(errors[0].starts_with("spec.template: Invalid value: "));
        assert!(errors[0].ends_with("field is immutable"));
        old.spec.as_mut().unwrap().suspend = Some(true);
        assert!(validate_update(&new, &old).is_empty());
    }

    fn indexed(spec: serde_json::Value) -> Job {
        let mut j = job();
        let mut value = serde_json::to_value(j.spec.take()).unwrap();
        value["completionMode"] = json!("Indexed");
        value["completions"] = json!(4);
        for (k, v) in spec.as_object().unwrap() {
            value[k] = v.clone();
        }
        j.spec = serde_json::from_value(value).unwrap();
        default(&mut j);
        generate_selector(&mut j);
        j
    }

    fn messages(j: &Job) -> Vec<String> {
        validate(j).iter().map(ToString::to_string).collect()
    }

    #[test]
    fn indexes_format_as_upstream() {
        assert_eq!(validate_indexes_format("", 5), Ok(0));
        assert_eq!(validate_indexes_format("0,2-4", 5), Ok(4));
        let err = |s: &str| validate_indexes_format(s, 5).unwrap_err().to_string();
        assert_eq!(
            err("1-2-3"),
            "the fragment \"1-2-3\" violates the requirement that an index interval can have at most two parts separated by '-'"
        );
        assert_eq!(
            err("a"),
            "cannot convert string to integer for index: \"a\""
        );
        assert_eq!(
            err("1,"),
            "cannot convert string to integer for index: \"\""
        );
        assert_eq!(err("5"), "too large index: \"5\"");
        assert_eq!(err("2-1"), "non-increasing order, previous: 2, current: 1");
        assert_eq!(
            err("0-2,2"),
            "non-increasing order, previous: 2, current: 2"
        );
    }

    #[test]
    fn per_index_limits_and_fail_index_rules() {
        let fail_index = json!({"podFailurePolicy": {"rules": [{"action": "FailIndex",
            "onExitCodes": {"operator": "In", "values": [42]}}]}});
        assert_eq!(
            messages(&indexed(fail_index.clone())),
            [
                r#"spec.podFailurePolicy.rules[0].action: Invalid value: "FailIndex": requires the backoffLimitPerIndex to be set"#
            ]
        );
        let mut with_limit = fail_index;
        with_limit["backoffLimitPerIndex"] = json!(1);
        with_limit["maxFailedIndexes"] = json!(5);
        assert_eq!(
            messages(&indexed(with_limit)),
            ["spec.maxFailedIndexes: Invalid value: 5: must be less than or equal to completions"]
        );
        let j = indexed(
            json!({"backoffLimitPerIndex": 1, "podFailurePolicy": {"rules": [
            {"action": "Retry", "onExitCodes": {"operator": "In", "values": [1]}},
            {"action": "", "onExitCodes": {"operator": "In", "values": [1]}}]}}),
        );
        assert_eq!(
            messages(&j),
            [
                r#"spec.podFailurePolicy.rules[0].action: Unsupported value: "Retry": supported values: "Count", "FailIndex", "FailJob", "Ignore""#,
                r#"spec.podFailurePolicy.rules[1].action: Required value: valid values: ["Count" "FailIndex" "FailJob" "Ignore"]"#,
            ]
        );
        let mut plain = job();
        plain.spec.as_mut().unwrap().max_failed_indexes = Some(1);
        default(&mut plain);
        generate_selector(&mut plain);
        assert_eq!(
            messages(&plain),
            [
                "spec.backoffLimitPerIndex: Required value: when maxFailedIndexes is specified",
                "spec.maxFailedIndexes: Invalid value: 1: requires indexed completion mode",
            ]
        );
    }

    #[test]
    fn success_policies_as_upstream() {
        let ok = indexed(json!({"successPolicy": {"rules": [
            {"succeededIndexes": "0,2-3", "succeededCount": 2}, {"succeededCount": 4}]}}));
        assert_eq!(messages(&ok), Vec::<String>::new());
        let bad = indexed(json!({"successPolicy": {"rules": [
            {}, {"succeededIndexes": "0-9"}, {"succeededIndexes": "1,2", "succeededCount": 3},
            {"succeededCount": 5}]}}));
        assert_eq!(
            messages(&bad),
            [
                "spec.successPolicy.rules[0]: Required value: at least one of succeededCount or succeededIndexes must be specified",
                r#"spec.successPolicy.rules[1].succeededIndexes: Invalid value: "0-9": error parsing succeededIndexes: too large index: "9""#,
                "spec.successPolicy.rules[2].succeededCount: Invalid value: 3: must be less than or equal to 2 (the number of indexes in the specified succeededIndexes field)",
                "spec.successPolicy.rules[3].succeededCount: Invalid value: 5: must be less than or equal to 4 (the number of specified completions)",
            ]
        );
        let empty = indexed(json!({"successPolicy": {"rules": []}}));
        assert_eq!(
            messages(&empty),
            [
                "spec.successPolicy.rules: Required value: at least one rules must be specified when the successPolicy is specified"
            ]
        );
        let mut non_indexed = job();
        non_indexed.spec.as_mut().unwrap().success_policy =
            Some(serde_json::from_value(json!({"rules": [{"succeededCount": 1}]})).unwrap());
        default(&mut non_indexed);
        generate_selector(&mut non_indexed);
        let m = messages(&non_indexed);
        assert_eq!(m.len(), 1);
        assert!(
            m[0].starts_with("spec.successPolicy: Invalid value: ")
                && m[0].ends_with(": requires indexed completion mode"),
            "{m:?}"
        );
        let mut changed = ok.clone();
        changed.spec.as_mut().unwrap().success_policy = None;
        let m: Vec<String> = validate_update(&changed, &ok)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert!(
            m.len() == 1 && m[0].starts_with("spec.successPolicy: Invalid value: "),
            "{m:?}"
        );
    }
}
