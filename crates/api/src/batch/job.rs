//! Jobs: `SetDefaults_Job`, the generated selector of the job strategy, `ValidateJob`,
//! `ValidateJobUpdate` and the status counts.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobSpec, JobStatus};
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
        errors.extend(validation::nonnegative(
            max_failed.into(),
            &path.child("maxFailedIndexes"),
        ));
        if spec.backoff_limit_per_index.is_none() {
            errors.push(FieldError::required(
                &path.child("backoffLimitPerIndex"),
                "when maxFailedIndexes is specified",
            ));
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

/// `ValidateJobUpdate`: the new job, then immutable selector, completionMode,
/// podFailurePolicy, backoffLimitPerIndex, managedBy, completions (but for Indexed jobs
/// scaling completions with parallelism) and template (but while suspended before
/// starting); the status counts.
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
}
