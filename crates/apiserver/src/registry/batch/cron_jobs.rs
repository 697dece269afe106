//! CronJobs (upstream `pkg/registry/batch/cronjob`).

use k8s_openapi::api::batch::v1::CronJob;
use serde_json::Value;
use skiff_api::batch::cron_job;
use skiff_api::core::pod::warnings;
use skiff_api::field::ErrorList;

use crate::registry::printers::{self, AGE, CONTAINERS, IMAGES, NAME, SELECTOR, column};
use crate::registry::{ResourceInfo, Strategy, TableColumn};

/// Where the IANA time zone database lives (Debian's tzdata), as Go's
/// `time.LoadLocation` reads it.
const ZONEINFO: &str = "/usr/share/zoneinfo";

/// `cj`, in category `all`; status subresource.
pub struct CronJobs;

/// Whether the time zone database has `zone` (already checked to be a plain
/// `Area/Location` name without `.` or `..` parts).
fn zone_exists(zone: &str) -> bool {
    std::path::Path::new(ZONEINFO).join(zone).is_file()
}

impl Strategy for CronJobs {
    type Object = CronJob;

    fn info(&self) -> ResourceInfo {
        ResourceInfo {
            short_names: &["cj"],
            categories: &["all"],
            ..ResourceInfo::of::<CronJob>()
        }
    }

    fn status_subresource(&self) -> bool {
        true
    }

    fn bumps_generation(&self) -> bool {
        true
    }

    fn default(&self, object: &mut CronJob) {
        cron_job::default(object);
    }

    fn prepare_for_create(&self, object: &mut CronJob) {
        object.status = Some(Default::default());
    }

    fn validate(&self, object: &CronJob) -> ErrorList {
        cron_job::validate(object, &zone_exists)
    }

    fn warnings_on_create(&self, object: &CronJob) -> Vec<String> {
        warnings::cron_job_warnings(object, None)
    }

    fn warnings_on_update(&self, new: &CronJob, old: &CronJob) -> Vec<String> {
        warnings::cron_job_warnings(new, Some(old))
    }

    fn validate_update(&self, new: &CronJob, old: &CronJob) -> ErrorList {
        cron_job::validate_update(new, old, &zone_exists)
    }

    fn columns(&self) -> Vec<TableColumn> {
        vec![
            NAME,
            column(
                "Schedule",
                "string",
                "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron.",
                0,
            ),
            column(
                "Timezone",
                "string",
                "The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones.",
                0,
            ),
            column(
                "Suspend",
                "boolean",
                "This flag tells the controller to suspend subsequent executions, it does not apply to already started executions.  Defaults to false.",
                0,
            ),
            column(
                "Active",
                "integer",
                "A list of pointers to currently running jobs.",
                0,
            ),
            column(
                "Last Schedule",
                "string",
                "Information when was the last time the job was successfully scheduled.",
                0,
            ),
            AGE,
            CONTAINERS,
            IMAGES,
            SELECTOR,
        ]
    }

    fn row(&self, object: &CronJob) -> Vec<Value> {
        let spec = &object.spec;
        let status = object.status.clone().unwrap_or_default();
        let job_spec = spec.job_template.spec.as_ref();
        let [containers, images] =
            printers::containers_and_images(job_spec.and_then(|s| s.template.spec.as_ref()));
        let last_schedule = match &status.last_schedule_time {
            Some(time) => printers::since(Some(time)),
            None => "<none>".to_owned(),
        };
        vec![
            Value::from(object.metadata.name.clone().unwrap_or_default()),
            Value::from(spec.schedule.clone()),
            Value::from(
                spec.time_zone
                    .clone()
                    .unwrap_or_else(|| "<none>".to_owned()),
            ),
            printers::bool_ptr(spec.suspend),
            Value::from(status.active.as_ref().map_or(0, Vec::len)),
            Value::from(last_schedule),
            printers::age(&object.metadata),
            containers,
            images,
            Value::from(printers::format_label_selector(
                job_spec.and_then(|s| s.selector.as_ref()),
            )),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn row_matches_upstream_printer() {
        let cj: CronJob = serde_json::from_value(json!({
            "metadata": {"name": "hello"},
            "spec": {
                "schedule": "*/5 * * * *",
                "suspend": false,
                "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}},
            },
            "status": {"active": [{"name": "hello-1"}]},
        }))
        .unwrap();
        assert_eq!(
            CronJobs.row(&cj),
            [
                json!("hello"),
                json!("*/5 * * * *"),
                json!("<none>"),
                json!("False"),
                json!(1),
                json!("<none>"),
                json!("<unknown>"),
                json!("c"),
                json!("busybox"),
                json!("<none>"),
            ]
        );
    }

    #[test]
    fn time_zones_come_from_the_zone_database() {
        assert!(zone_exists("Europe/Paris"));
        assert!(!zone_exists("Mars/Olympus"));
    }
}
