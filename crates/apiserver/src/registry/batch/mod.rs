//! batch/v1 (upstream `pkg/registry/batch`): jobs and cronjobs.

mod cron_jobs;
mod jobs;

use super::Registry;

/// Adds the batch/v1 kinds in upstream's discovery order.
pub fn add(registry: &mut Registry) {
    registry.add(cron_jobs::CronJobs);
    registry.add(jobs::Jobs);
}
