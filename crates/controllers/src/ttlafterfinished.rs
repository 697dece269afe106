//! The TTL-after-finished controller (upstream `pkg/controller/ttlafterfinished`):
//! deletes a finished Job once `spec.ttlSecondsAfterFinished` seconds have passed since
//! it finished, with foreground propagation so that its pods go first.
//!
//! A Job is finished when its `Complete` or `Failed` condition is True; it finished at
//! that condition's `lastTransitionTime` (or, lacking one, at `status.completionTime`).
//! A Job whose time has not come is requeued for then. Before deleting, the controller
//! reads the Job again from the API server and checks once more (the TTL may have
//! changed), and deletes with a UID precondition so that a new Job of the same name is
//! never the one deleted.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Preconditions, PropagationPolicy};
use skiff_client::cache::{Delta, SharedInformer, SharedInformerFactory, object_key};
use skiff_client::workqueue::{QueueMetrics, WorkQueue};
use tokio_util::sync::CancellationToken;

use crate::Error;
use crate::controller_utils::run_controller;
use crate::job::is_job_finished as is_finished;

/// The controller's name (`--controllers`).
pub const NAME: &str = "ttl-after-finished-controller";

/// True when the Job has a TTL and has finished (upstream `needsCleanup`).
pub(crate) fn needs_cleanup(job: &Job) -> bool {
    job.spec
        .as_ref()
        .is_some_and(|s| s.ttl_seconds_after_finished.is_some())
        && is_finished(job)
}

/// When the finished Job finished (upstream `jobFinishTime`): the `lastTransitionTime`
/// of its first True `Complete` or `Failed` condition, else `status.completionTime`.
/// Errors: neither is set.
pub(crate) fn finish_time(job: &Job) -> Result<Timestamp, String> {
    let status = job.status.as_ref();
    let condition = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| {
            cs.iter()
                .find(|c| matches!(c.type_.as_str(), "Complete" | "Failed") && c.status == "True")
        })
        .and_then(|c| c.last_transition_time.as_ref());
    condition
        .or_else(|| status.and_then(|s| s.completion_time.as_ref()))
        .map(|t| t.0)
        .ok_or_else(|| {
            format!(
                "unable to find the time when the Job {}/{} finished",
                job.metadata.namespace.as_deref().unwrap_or(""),
                job.metadata.name.as_deref().unwrap_or("")
            )
        })
}

/// Where a Job stands with its TTL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expiry {
    /// Not to be cleaned up: no TTL, not finished, or being deleted already.
    Keep,
    /// To be deleted once this much more time has passed.
    After(Duration),
    /// Expired at this time: delete it.
    Expired(Timestamp),
}

/// The Job's TTL state at `now` (upstream `processTTL` and `timeLeft`): expired once
/// finish + TTL ≤ now. Errors: finished without a finish time.
pub(crate) fn expiry(job: &Job, now: Timestamp) -> Result<Expiry, String> {
    if job.metadata.deletion_timestamp.is_some() || !needs_cleanup(job) {
        return Ok(Expiry::Keep);
    }
    let ttl = job
        .spec
        .as_ref()
        .and_then(|s| s.ttl_seconds_after_finished)
        .unwrap_or(0);
    let finished = finish_time(job)?;
    let expire_nanos = finished.as_nanosecond() + i128::from(ttl) * 1_000_000_000;
    let left = expire_nanos - now.as_nanosecond();
    if left > 0 {
        let left = u64::try_from(left).unwrap_or(u64::MAX);
        return Ok(Expiry::After(Duration::from_nanos(left)));
    }
    let expired = Timestamp::from_nanosecond(expire_nanos).unwrap_or(now);
    Ok(Expiry::Expired(expired))
}

/// The TTL-after-finished controller; see the module doc.
pub struct TtlAfterFinishedController {
    client: kube::Client,
    jobs: Arc<SharedInformer<Job>>,
    queue: Arc<WorkQueue<String>>,
}

impl std::fmt::Debug for TtlAfterFinishedController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TtlAfterFinishedController")
            .finish_non_exhaustive()
    }
}

impl TtlAfterFinishedController {
    /// The controller over the factory's Job informer, its handler registered: a Job
    /// added or updated that has a TTL and has finished is queued (upstream `addJob`,
    /// `updateJob`).
    pub fn new(
        client: kube::Client,
        factory: &SharedInformerFactory,
        queue_metrics: Arc<dyn QueueMetrics>,
    ) -> Arc<Self> {
        let queue = Arc::new(WorkQueue::new("ttl_jobs_to_delete").with_metrics(queue_metrics));
        let jobs = factory.informer::<Job>();
        let q = Arc::clone(&queue);
        jobs.add_event_handler(Box::new(move |delta: &Delta<Job>| {
            let job = match delta {
                Delta::Added(job) | Delta::Updated(_, job) => job,
                Delta::Deleted(_) => return,
            };
            if job.metadata.deletion_timestamp.is_none() && needs_cleanup(job) {
                q.add(object_key(job.as_ref()));
            }
        }));
        Arc::new(Self {
            client,
            jobs,
            queue,
        })
    }

    /// Waits for the informer, then works with `workers` workers until `cancel`
    /// (`--concurrent-ttl-after-finished-syncs`, default 5).
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        run_controller(
            NAME,
            &[&*self.jobs],
            &self.queue,
            workers,
            cancel,
            &self,
            |this, key| async move { this.process_job(&key).await },
        )
        .await;
    }

    /// The Job's expiry at now; a Job not yet expired is requeued for when it will be.
    fn check(&self, key: &str, job: &Job) -> Result<Option<Timestamp>, Error> {
        match expiry(job, Timestamp::now()).map_err(Error::Invalid)? {
            Expiry::Keep => Ok(None),
            Expiry::After(wait) => {
                self.queue.add_after(key.to_owned(), wait);
                Ok(None)
            }
            Expiry::Expired(at) => Ok(Some(at)),
        }
    }

    /// One Job (upstream `processJob`): checks the cached Job, then the Job as the API
    /// server has it, and deletes it in the foreground if both have expired.
    async fn process_job(&self, key: &str) -> Result<(), Error> {
        let Some(cached) = self.jobs.store().get(key) else {
            return Ok(());
        };
        if self.check(key, &cached)?.is_none() {
            return Ok(());
        }
        let ns = cached.metadata.namespace.clone().unwrap_or_default();
        let name = cached.metadata.name.clone().unwrap_or_default();
        let api: Api<Job> = Api::namespaced(self.client.clone(), &ns);
        // The TTL may have changed since the cache saw the Job.
        let fresh = match api.get(&name).await {
            Ok(job) => job,
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        let Some(expired) = self.check(key, &fresh)? else {
            return Ok(());
        };
        tracing::debug!(job = key, expired = %expired, "cleaning up an expired job");
        let params = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Foreground),
            preconditions: Some(Preconditions {
                uid: fresh.metadata.uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match api.delete(&name, &params).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::{JobCondition, JobSpec, JobStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn ts(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn job(ttl: Option<i32>, condition: Option<(&str, &str, Option<&str>)>) -> Job {
        let mut job = Job::default();
        job.metadata.name = Some("j".to_owned());
        job.metadata.namespace = Some("ns".to_owned());
        job.spec = Some(JobSpec {
            ttl_seconds_after_finished: ttl,
            ..Default::default()
        });
        job.status = Some(JobStatus {
            conditions: condition.map(|(type_, status, at)| {
                vec![JobCondition {
                    type_: type_.to_owned(),
                    status: status.to_owned(),
                    last_transition_time: at.map(|t| Time(ts(t))),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        });
        job
    }

    const DONE: &str = "2024-05-01T00:00:00Z";

    #[test]
    fn only_finished_jobs_with_a_ttl_are_cleaned_up() {
        let now = ts("2024-05-02T00:00:00Z");
        assert!(!needs_cleanup(&job(
            None,
            Some(("Complete", "True", Some(DONE)))
        )));
        assert!(!needs_cleanup(&job(Some(0), None)));
        assert!(!needs_cleanup(&job(
            Some(0),
            Some(("Complete", "False", Some(DONE)))
        )));
        assert!(!needs_cleanup(&job(
            Some(0),
            Some(("Suspended", "True", Some(DONE)))
        )));
        assert!(needs_cleanup(&job(
            Some(0),
            Some(("Failed", "True", Some(DONE)))
        )));
        assert_eq!(expiry(&job(None, None), now), Ok(Expiry::Keep));
        let mut deleting = job(Some(0), Some(("Complete", "True", Some(DONE))));
        deleting.metadata.deletion_timestamp = Some(Time(now));
        assert_eq!(expiry(&deleting, now), Ok(Expiry::Keep));
    }

    #[test]
    fn expiry_is_finish_plus_ttl() {
        let j = job(Some(100), Some(("Complete", "True", Some(DONE))));
        assert_eq!(
            expiry(&j, ts("2024-05-01T00:00:00Z")),
            Ok(Expiry::After(Duration::from_secs(100)))
        );
        assert_eq!(
            expiry(&j, ts("2024-05-01T00:01:39.5Z")),
            Ok(Expiry::After(Duration::from_millis(500)))
        );
        let at = ts("2024-05-01T00:01:40Z");
        assert_eq!(expiry(&j, at), Ok(Expiry::Expired(at)));
        assert_eq!(
            expiry(&j, ts("2024-05-03T00:00:00Z")),
            Ok(Expiry::Expired(at))
        );
        // A TTL of zero: expired as soon as finished.
        let zero = job(Some(0), Some(("Failed", "True", Some(DONE))));
        assert_eq!(expiry(&zero, ts(DONE)), Ok(Expiry::Expired(ts(DONE))));
        // Finished in the future (clock skew): wait for it.
        assert_eq!(
            expiry(&zero, ts("2024-04-30T23:59:00Z")),
            Ok(Expiry::After(Duration::from_secs(60)))
        );
    }

    #[test]
    fn the_finish_time_falls_back_to_the_completion_time() {
        let mut j = job(Some(10), Some(("Complete", "True", None)));
        assert_eq!(
            finish_time(&j),
            Err("unable to find the time when the Job ns/j finished".to_owned())
        );
        assert!(expiry(&j, ts(DONE)).is_err());
        if let Some(s) = j.status.as_mut() {
            s.completion_time = Some(Time(ts(DONE)));
        }
        assert_eq!(finish_time(&j), Ok(ts(DONE)));
        assert_eq!(
            expiry(&j, ts(DONE)),
            Ok(Expiry::After(Duration::from_secs(10)))
        );
    }
}
