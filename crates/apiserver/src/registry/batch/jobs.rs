//! Jobs (upstream `pkg/registry/batch/job`).

use k8s_openapi::api::batch::v1::{Job, JobStatus};
use serde_json::Value;
use skiff_api::batch::job;
use skiff_api::core::pod::warnings;
use skiff_api::field::ErrorList;

use crate::registry::printers::{self, AGE, CONTAINERS, IMAGES, NAME, SELECTOR, column};
use crate::registry::{ResourceInfo, Strategy, TableColumn};

/// In category `all`; status subresource; field selector `status.successful`.
pub struct Jobs;

fn has_condition(status: &JobStatus, kind: &str) -> bool {
    status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == kind && c.status == "True")
}

/// The Status cell, as upstream's job printer decides it.
fn status_cell(object: &Job, status: &JobStatus) -> &'static str {
    if has_condition(status, "Complete") {
        "Complete"
    } else if has_condition(status, "Failed") {
        "Failed"
    } else if object.metadata.deletion_timestamp.is_some() {
        "Terminating"
    } else if has_condition(status, "Suspended") {
        "Suspended"
    } else if has_condition(status, "FailureTarget") {
        "FailureTarget"
    } else if has_condition(status, "SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else {
        "Running"
    }
}

/// The Completions cell: `succeeded/completions`, `succeeded/1 of parallelism` for a
/// work queue.
fn completions_cell(object: &Job, succeeded: i32) -> String {
    let spec = object.spec.clone().unwrap_or_default();
    match (spec.completions, spec.parallelism) {
        (Some(completions), _) => format!("{succeeded}/{completions}"),
        (None, Some(parallelism)) if parallelism > 1 => {
            format!("{succeeded}/1 of {parallelism}")
        }
        _ => format!("{succeeded}/1"),
    }
}

/// The Duration cell: start to completion (or now), empty before the start.
fn duration_cell(status: &JobStatus) -> String {
    let Some(start) = &status.start_time else {
        return String::new();
    };
    let end = status
        .completion_time
        .as_ref()
        .map_or_else(|| printers::now().as_second(), |t| t.0.as_second());
    printers::human_duration(end - start.0.as_second())
}

impl Strategy for Jobs {
    type Object = Job;

    fn info(&self) -> ResourceInfo {
        ResourceInfo {
            categories: &["all"],
            ..ResourceInfo::of::<Job>()
        }
    }

    fn status_subresource(&self) -> bool {
        true
    }

    fn bumps_generation(&self) -> bool {
        true
    }

    /// batch/v1 keeps upstream's old default: a delete without a propagation policy
    /// orphans the Job's pods (upstream `jobStrategy.DefaultGarbageCollectionPolicy`).
    fn orphans_by_default(&self) -> bool {
        true
    }

    fn default(&self, object: &mut Job) {
        job::default(object);
    }

    /// Clears the status and generates the selector from `metadata.uid`, which the REST
    /// layer sets before this hook (upstream generates it in Validate for that reason).
    fn prepare_for_create(&self, object: &mut Job) {
        object.status = Some(Default::default());
        job::generate_selector(object);
    }

    fn validate(&self, object: &Job) -> ErrorList {
        job::validate(object)
    }

    fn warnings_on_create(&self, object: &Job) -> Vec<String> {
        warnings::job_warnings(object, None)
    }

    fn warnings_on_update(&self, new: &Job, old: &Job) -> Vec<String> {
        warnings::job_warnings(new, Some(old))
    }

    fn validate_update(&self, new: &Job, old: &Job) -> ErrorList {
        job::validate_update(new, old)
    }

    fn selectable_fields(&self, object: &Job) -> Vec<(&'static str, String)> {
        let succeeded = object
            .status
            .as_ref()
            .and_then(|s| s.succeeded)
            .unwrap_or(0);
        vec![("status.successful", succeeded.to_string())]
    }

    fn columns(&self) -> Vec<TableColumn> {
        vec![
            NAME,
            column("Status", "string", "Status of the job.", 0),
            column(
                "Completions",
                "string",
                "The completion status of the job",
                0,
            ),
            column(
                "Duration",
                "string",
                "Time required to complete the job.",
                0,
            ),
            AGE,
            CONTAINERS,
            IMAGES,
            SELECTOR,
        ]
    }

    fn row(&self, object: &Job) -> Vec<Value> {
        let status = object.status.clone().unwrap_or_default();
        let spec = object.spec.as_ref();
        let [containers, images] =
            printers::containers_and_images(spec.and_then(|s| s.template.spec.as_ref()));
        vec![
            Value::from(object.metadata.name.clone().unwrap_or_default()),
            Value::from(status_cell(object, &status)),
            Value::from(completions_cell(object, status.succeeded.unwrap_or(0))),
            Value::from(duration_cell(&status)),
            printers::age(&object.metadata),
            containers,
            images,
            Value::from(printers::format_label_selector(
                spec.and_then(|s| s.selector.as_ref()),
            )),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(value: Value) -> Job {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn rows_match_upstream_printer() {
        let done = job(json!({
            "metadata": {"name": "pi"},
            "spec": {"completions": 1, "parallelism": 1, "template": {"spec": {"containers": [{"name": "pi", "image": "perl"}]}}},
            "status": {
                "succeeded": 1,
                "startTime": "2026-01-01T00:00:00Z",
                "completionTime": "2026-01-01T00:00:42Z",
                "conditions": [{"type": "Complete", "status": "True"}],
            },
        }));
        assert_eq!(
            Jobs.row(&done)[..4],
            [json!("pi"), json!("Complete"), json!("1/1"), json!("42s")]
        );
        let queue = job(json!({
            "metadata": {"name": "q"},
            "spec": {"parallelism": 3, "template": {}},
            "status": {"conditions": [{"type": "Suspended", "status": "True"}]},
        }));
        assert_eq!(
            Jobs.row(&queue)[..4],
            [json!("q"), json!("Suspended"), json!("0/1 of 3"), json!("")]
        );
        assert_eq!(
            Jobs.selectable_fields(&done),
            [("status.successful", "1".to_owned())]
        );
    }
}
