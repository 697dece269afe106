//! batch/v1: defaulting (`pkg/apis/batch/v1/defaults.go`) and validation
//! (`pkg/apis/batch/validation`) of jobs and cronjobs, and the cron schedule syntax
//! cronjobs accept.

pub mod cron;
pub mod cron_job;
pub mod job;
