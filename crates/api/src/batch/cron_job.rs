//! CronJobs: `SetDefaults_CronJob`, `ValidateCronJobCreate`, `ValidateCronJobUpdate`.

use k8s_openapi::api::batch::v1::{CronJob, CronJobSpec};

use crate::core::pod;
use crate::field::{ErrorList, FieldError, Path};
use crate::validation::{json, nonnegative_opt};

use super::{cron, job};

/// The longest cronjob name: its jobs are named `<cronjob>-<11 characters>` and must be
/// DNS labels (63).
const MAX_NAME_LENGTH: usize = 52;

/// concurrencyPolicy Allow, suspend false, successfulJobsHistoryLimit 3,
/// failedJobsHistoryLimit 1; the job template's pod template defaults.
pub fn default(cron_job: &mut CronJob) {
    let spec = &mut cron_job.spec;
    spec.concurrency_policy
        .get_or_insert_with(|| "Allow".to_owned());
    spec.suspend.get_or_insert(false);
    spec.successful_jobs_history_limit.get_or_insert(3);
    spec.failed_jobs_history_limit.get_or_insert(1);
    let job_spec = spec.job_template.spec.get_or_insert_with(Default::default);
    pod::default_pod_spec(job_spec.template.spec.get_or_insert_with(Default::default));
}

/// `ValidateCronJobCreate` (metadata excepted but the 52-character name limit).
/// `known_zone` says whether an IANA time zone name exists (Go's `time.LoadLocation`).
pub fn validate(cron_job: &CronJob, known_zone: &dyn Fn(&str) -> bool) -> ErrorList {
    let mut errors = validate_spec(&cron_job.spec, None, known_zone);
    if let Some(name) = cron_job
        .metadata
        .name
        .as_deref()
        .filter(|n| n.len() > MAX_NAME_LENGTH)
    {
        errors.push(FieldError::invalid(
            &Path::new("metadata").child("name"),
            name,
            "must be no more than 52 characters",
        ));
    }
    errors
}

/// `ValidateCronJobUpdate`: a schedule may keep a `TZ=` it had; an unchanged time zone is
/// not checked again.
pub fn validate_update(
    new: &CronJob,
    old: &CronJob,
    known_zone: &dyn Fn(&str) -> bool,
) -> ErrorList {
    validate_spec(&new.spec, Some(&old.spec), known_zone)
}

fn validate_spec(
    spec: &CronJobSpec,
    old: Option<&CronJobSpec>,
    known_zone: &dyn Fn(&str) -> bool,
) -> ErrorList {
    let path = Path::new("spec");
    let mut errors = Vec::new();
    let schedule_path = path.child("schedule");
    if spec.schedule.is_empty() {
        errors.push(FieldError::required(&schedule_path, ""));
    } else {
        let allow_tz = old.is_some_and(|o| o.schedule.contains("TZ"));
        errors.extend(validate_schedule(
            &spec.schedule,
            allow_tz,
            spec.time_zone.is_some(),
            &schedule_path,
        ));
    }
    errors.extend(nonnegative_opt(
        spec.starting_deadline_seconds,
        &path.child("startingDeadlineSeconds"),
    ));
    if old.is_none_or(|o| o.time_zone != spec.time_zone)
        && let Some(zone) = &spec.time_zone
    {
        errors.extend(validate_time_zone(
            zone,
            known_zone,
            &path.child("timeZone"),
        ));
    }
    let policy_path = path.child("concurrencyPolicy");
    match spec.concurrency_policy.as_deref().unwrap_or("") {
        "" => errors.push(FieldError::required(&policy_path, "")),
        "Allow" | "Forbid" | "Replace" => {}
        other => errors.push(FieldError::not_supported(
            &policy_path,
            other,
            &["Allow", "Forbid", "Replace"],
        )),
    }
    errors.extend(validate_job_template(spec, &path.child("jobTemplate")));
    errors.extend(nonnegative_opt(
        spec.successful_jobs_history_limit,
        &path.child("successfulJobsHistoryLimit"),
    ));
    errors.extend(nonnegative_opt(
        spec.failed_jobs_history_limit,
        &path.child("failedJobsHistoryLimit"),
    ));
    errors
}

/// `validateScheduleFormat`.
fn validate_schedule(
    schedule: &str,
    allow_tz: bool,
    has_time_zone: bool,
    path: &Path,
) -> ErrorList {
    let mut errors = Vec::new();
    if let Err(message) = cron::parse_standard(schedule) {
        errors.push(FieldError::invalid(path, schedule, message));
    }
    if schedule.contains("TZ") {
        if !allow_tz {
            errors.push(FieldError::invalid(
                path,
                schedule,
                "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
            ));
        } else if has_time_zone {
            errors.push(FieldError::invalid(
                path,
                schedule,
                "cannot use both timeZone field and TZ or CRON_TZ in schedule",
            ));
        }
    }
    errors
}

/// `validateTimeZone`: non-empty, IANA characters, not `Local`, and known.
fn validate_time_zone(zone: &str, known_zone: &dyn Fn(&str) -> bool, path: &Path) -> ErrorList {
    if zone.is_empty() {
        return vec![FieldError::invalid(
            path,
            zone,
            "timeZone must be nil or non-empty string",
        )];
    }
    let part_ok = |part: &str| {
        part != "."
            && part != ".."
            && !part.starts_with('-')
            && (1..=14).contains(&part.len())
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'+'))
    };
    let unknown = || FieldError::invalid(path, zone, format!("unknown time zone {zone}"));
    if !zone.split('/').all(part_ok) {
        return vec![unknown()];
    }
    let mut errors = Vec::new();
    if zone.eq_ignore_ascii_case("Local") {
        errors.push(FieldError::invalid(
            path,
            zone,
            "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
        ));
    }
    if zone != "UTC" && !known_zone(zone) {
        errors.push(unknown());
    }
    errors
}

/// `ValidateJobTemplateSpec`: the job rules without the selector, which is generated.
fn validate_job_template(spec: &CronJobSpec, path: &Path) -> ErrorList {
    let job_path = path.child("spec");
    let default = Default::default();
    let job_spec = spec.job_template.spec.as_ref().unwrap_or(&default);
    let mut errors = job::validate_spec_fields(job_spec, &job_path);
    if let Some(selector) = &job_spec.selector {
        errors.push(FieldError::invalid(
            &job_path.child("selector"),
            json(selector),
            "`selector` will be auto-generated",
        ));
    }
    if job_spec.manual_selector == Some(true) {
        errors.push(FieldError::not_supported(
            &job_path.child("manualSelector"),
            true,
            &["nil", "false"],
        ));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cron_job(schedule: &str) -> CronJob {
        serde_json::from_value(json!({
            "metadata": {"name": "hello"},
            "spec": {
                "schedule": schedule,
                "jobTemplate": {"spec": {"template": {"spec": {
                    "restartPolicy": "OnFailure",
                    "containers": [{"name": "c", "image": "busybox"}],
                }}}},
            },
        }))
        .unwrap()
    }

    fn zones(zone: &str) -> bool {
        zone == "Europe/Paris"
    }

    fn messages(errors: ErrorList) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn defaults_match_upstream() {
        let mut cj = cron_job("*/1 * * * *");
        default(&mut cj);
        let spec = serde_json::to_value(&cj.spec).unwrap();
        assert_eq!(spec["concurrencyPolicy"], "Allow");
        assert_eq!(spec["suspend"], false);
        assert_eq!(spec["successfulJobsHistoryLimit"], 3);
        assert_eq!(spec["failedJobsHistoryLimit"], 1);
        assert!(validate(&cj, &zones).is_empty());
    }

    #[test]
    fn schedule_and_time_zone_messages() {
        let mut cj = cron_job("61 * * * *");
        default(&mut cj);
        cj.spec.time_zone = Some("Mars/Olympus".into());
        assert_eq!(
            messages(validate(&cj, &zones)),
            [
                r#"spec.schedule: Invalid value: "61 * * * *": end of range (61) above maximum (59): 61"#,
                r#"spec.timeZone: Invalid value: "Mars/Olympus": unknown time zone Mars/Olympus"#,
            ]
        );
        let mut tz = cron_job("TZ=UTC 0 * * * *");
        default(&mut tz);
        assert_eq!(
            messages(validate(&tz, &zones)),
            [
                r#"spec.schedule: Invalid value: "TZ=UTC 0 * * * *": cannot use TZ or CRON_TZ in schedule, use timeZone field instead"#
            ]
        );
        let mut paris = cron_job("@daily");
        default(&mut paris);
        paris.spec.time_zone = Some("Europe/Paris".into());
        assert!(validate(&paris, &zones).is_empty());
    }

    #[test]
    fn long_names_and_job_template_selectors_are_rejected() {
        let mut cj = cron_job("@hourly");
        default(&mut cj);
        cj.metadata.name = Some("a".repeat(53));
        cj.spec.job_template.spec.as_mut().unwrap().selector = Some(Default::default());
        let errors = messages(validate(&cj, &zones));
        assert_eq!(errors.len(), 2);
        assert_eq!(
            errors[0],
            "spec.jobTemplate.spec.selector: Invalid value: {}: `selector` will be auto-generated"
        );
        assert!(errors[1].ends_with("must be no more than 52 characters"));
    }
}
