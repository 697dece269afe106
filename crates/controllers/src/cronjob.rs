//! The CronJob controller (upstream `pkg/controller/cronjob`, the v2 controller of
//! `cronjob_controllerv2.go` and `utils.go`): creates a Job for each time of a
//! CronJob's schedule, keeps `status.active`, `lastScheduleTime` and
//! `lastSuccessfulTime`, and deletes the finished Jobs beyond the history limits.
//!
//! Each sync requeues the CronJob for its next scheduled time (plus 100 ms of slack, as
//! upstream's `nextScheduleDelta`); a Job the CronJob controls queues it on every change.
//! The schedule is read in `spec.timeZone`, else in the schedule's `TZ=` / `CRON_TZ=`
//! zone, else in UTC: upstream uses the controller manager's local zone there, and
//! Skiff's runs in UTC. A time missed while the controller was away is started late
//! (only the most recent one, as upstream), unless `startingDeadlineSeconds` has passed.
//!
//! The decisions — which time is due, what the Job looks like, which Jobs leave the
//! active list or the history — are pure functions of the CronJob, its Jobs and the time
//! ([`decide`], [`observe_jobs`], [`history_victims`], [`job_from_template`]); the
//! controller only reads and writes the API.
//!
//! Events, as upstream, from `cronjob-controller`: `SuccessfulCreate`, `FailedCreate`,
//! `SuccessfulDelete`, `FailedDelete`, `FailedGet`, `SawCompletedJob`, `MissingJob`,
//! `UnexpectedJob`, `JobAlreadyActive`, `UnknownTimeZone`, `UnsupportedSchedule`,
//! `UnparseableSchedule`, `UnParseableCronJobSchedule`, `InvalidSchedule`,
//! `TooManyMissedTimes`, `MissSchedule`.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::{CronJob, CronJobStatus, Job};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use k8s_openapi::jiff::tz::TimeZone;
use kube::api::{Api, DeleteParams, PostParams};
use skiff_api::batch::cron::{Schedule, format_rfc3339};
use skiff_client::cache::{Delta, SharedInformer, SharedInformerFactory, object_key};
use skiff_client::events::{EventDetails, EventRecorder, reference};
use skiff_client::workqueue::{QueueMetrics, WorkQueue};
use tokio_util::sync::CancellationToken;

use crate::Error;
use crate::controller_utils::{
    controller_of, controller_ref, resolve_controller_ref, run_controller, update_status_retrying,
};

/// The controller's name (`--controllers`, the events' reporting controller).
pub const NAME: &str = "cronjob-controller";

/// The annotation on each Job with its scheduled time, RFC 3339 in the CronJob's
/// `spec.timeZone` (UTC without one), as upstream `CronJobScheduledTimestampAnnotation`.
pub const SCHEDULED_TIMESTAMP_ANNOTATION: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";

/// Where the IANA time zone database lives (Debian's tzdata), as Go's
/// `time.LoadLocation` reads it.
const ZONEINFO: &str = "/usr/share/zoneinfo";

/// The slack added to each requeue (upstream `nextScheduleDelta`), so that the sync
/// comes after the scheduled time even with a little clock skew.
const NEXT_SCHEDULE_DELTA: Duration = Duration::from_millis(100);

/// More missed times than this and only the most recent one is started, with a
/// `TooManyMissedTimes` warning.
const MAX_MISSED: u64 = 100;

/// The error upstream reports for a schedule that never fires (`0 0 30 2 *`).
const NEVER_FIRES: &str = "time difference between two schedules is less than 1 second";

/// Go's `time.LoadLocation`: `""` and `UTC` are UTC, `Local` is the controller's zone
/// (UTC: Skiff runs in UTC), any other name is read from the system tzdb. `Err` holds
/// Go's message (`unknown time zone Mars/Olympus`).
pub fn load_location(name: &str) -> Result<TimeZone, String> {
    if matches!(name, "" | "UTC" | "Local") {
        return Ok(TimeZone::UTC);
    }
    let unknown = || format!("unknown time zone {name}");
    // Names stay inside the database, as Go's checks keep them.
    let escapes = name.starts_with('/')
        || name.contains('\\')
        || name
            .split('/')
            .any(|part| part.is_empty() || part == "." || part == "..");
    if escapes {
        return Err(unknown());
    }
    let data = std::fs::read(Path::new(ZONEINFO).join(name)).map_err(|_| unknown())?;
    TimeZone::tzif(name, &data).map_err(|_| unknown())
}

/// An event to record about the CronJob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Note {
    pub(crate) type_: &'static str,
    pub(crate) reason: &'static str,
    pub(crate) message: String,
}

fn normal(reason: &'static str, message: String) -> Note {
    Note {
        type_: "Normal",
        reason,
        message,
    }
}

fn warning(reason: &'static str, message: String) -> Note {
    Note {
        type_: "Warning",
        reason,
        message,
    }
}

/// The type of the Job's first `Complete` or `Failed` condition that is True (upstream
/// `getFinishedStatus`): the Job has finished.
pub(crate) fn finished_type(job: &Job) -> Option<&str> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| matches!(c.type_.as_str(), "Complete" | "Failed") && c.status == "True")
        .map(|c| c.type_.as_str())
}

/// True when the Job has a `Complete` condition that is True (upstream
/// `IsJobSucceeded`).
fn is_succeeded(job: &Job) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Complete" && c.status == "True")
        })
}

fn uid_of(job: &Job) -> &str {
    job.metadata.uid.as_deref().unwrap_or("")
}

fn in_active(status: &CronJobStatus, uid: &str) -> bool {
    status
        .active
        .iter()
        .flatten()
        .any(|r| r.uid.as_deref() == Some(uid))
}

fn remove_from_active(status: &mut CronJobStatus, uid: &str) {
    if let Some(active) = status.active.as_mut() {
        active.retain(|r| r.uid.as_deref() != Some(uid));
    }
}

/// The status with an empty active list as none, so that equal statuses compare equal.
fn normalized(mut status: CronJobStatus) -> CronJobStatus {
    if status.active.as_ref().is_some_and(Vec::is_empty) {
        status.active = None;
    }
    status
}

/// The name of the Job for `scheduled` (upstream `getJobName`): the CronJob's name and
/// the scheduled time in minutes since the epoch, so that one time makes one Job.
pub(crate) fn job_name(cron_job: &str, scheduled: Timestamp) -> String {
    format!("{cron_job}-{}", scheduled.as_second() / 60)
}

/// The Job of `cron_job` for `scheduled` (upstream `getJobFromTemplate2`): the
/// template's labels, annotations and spec, the scheduled-timestamp annotation in
/// `annotation_zone`, and a controller reference to the CronJob.
pub(crate) fn job_from_template(
    cron_job: &CronJob,
    scheduled: Timestamp,
    annotation_zone: &TimeZone,
) -> Job {
    let template = &cron_job.spec.job_template;
    let meta = template.metadata.clone().unwrap_or_default();
    let mut annotations = meta.annotations.unwrap_or_default();
    annotations.insert(
        SCHEDULED_TIMESTAMP_ANNOTATION.to_owned(),
        format_rfc3339(scheduled, annotation_zone),
    );
    let name = cron_job.metadata.name.as_deref().unwrap_or("");
    Job {
        metadata: ObjectMeta {
            name: Some(job_name(name, scheduled)),
            namespace: cron_job.metadata.namespace.clone(),
            labels: meta.labels.filter(|l| !l.is_empty()),
            annotations: Some(annotations),
            owner_references: Some(vec![controller_ref(
                &cron_job.metadata,
                "batch/v1",
                "CronJob",
            )]),
            ..Default::default()
        },
        spec: template.spec.clone(),
        status: None,
    }
}

/// What the CronJob's Jobs say about its status (the first half of upstream
/// `syncCronJob`), applied to `status`.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Observed {
    /// `SawCompletedJob` and `UnexpectedJob` events.
    pub(crate) notes: Vec<Note>,
    /// Active references whose Job the cache does not have: the controller asks the API
    /// server, and drops those that are gone (`MissingJob`).
    pub(crate) missing: Vec<ObjectReference>,
}

/// Drops the finished Jobs from `status.active` (`SawCompletedJob`), moves
/// `lastSuccessfulTime` to the latest completion of a successful Job, warns of unfinished
/// Jobs missing from the list (`UnexpectedJob`), and lists the active references with no
/// Job among `jobs`.
pub(crate) fn observe_jobs(status: &mut CronJobStatus, jobs: &[Arc<Job>]) -> Observed {
    let mut observed = Observed::default();
    let name_of = |j: &Job| j.metadata.name.clone().unwrap_or_default();
    for job in jobs {
        let found = in_active(status, uid_of(job));
        match finished_type(job) {
            None if !found => observed.notes.push(warning(
                "UnexpectedJob",
                format!(
                    "Saw a job that the controller did not create or forgot: {}",
                    name_of(job)
                ),
            )),
            None => {}
            Some(condition) => {
                if found {
                    remove_from_active(status, uid_of(job));
                    observed.notes.push(normal(
                        "SawCompletedJob",
                        format!(
                            "Saw completed job: {}, condition: {condition}",
                            name_of(job)
                        ),
                    ));
                }
                if is_succeeded(job) {
                    let completed = job.status.as_ref().and_then(|s| s.completion_time.clone());
                    match (&status.last_successful_time, completed) {
                        (None, c) => status.last_successful_time = c,
                        (Some(last), Some(c)) if c.0 > last.0 => {
                            status.last_successful_time = Some(c);
                        }
                        _ => {}
                    }
                }
            }
        }
    }
    let uids: HashSet<&str> = jobs.iter().map(|j| uid_of(j)).collect();
    observed.missing = status
        .active
        .iter()
        .flatten()
        .filter(|r| !uids.contains(r.uid.as_deref().unwrap_or("")))
        .cloned()
        .collect();
    observed
}

/// Upstream's `byJobStartTime`: started Jobs first, earliest start first, then by name.
fn by_start_time(a: &Job, b: &Job) -> std::cmp::Ordering {
    let start = |j: &Job| {
        j.status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .map(|t| t.0)
    };
    match (start(a), start(b)) {
        (Some(x), Some(y)) if x != y => x.cmp(&y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        _ => a.metadata.name.cmp(&b.metadata.name),
    }
}

/// The finished Jobs to delete (upstream `cleanupFinishedJobs`): the oldest successful
/// ones beyond `successfulJobsHistoryLimit` and the oldest failed ones beyond
/// `failedJobsHistoryLimit`; a limit that is not set keeps every Job (the API server
/// defaults them to 3 and 1).
pub(crate) fn history_victims(cron_job: &CronJob, jobs: &[Arc<Job>]) -> Vec<Arc<Job>> {
    let oldest_beyond = |kind: &str, limit: Option<i32>| -> Vec<Arc<Job>> {
        let Some(limit) = limit else {
            return Vec::new();
        };
        let mut of_kind: Vec<Arc<Job>> = jobs
            .iter()
            .filter(|j| finished_type(j) == Some(kind))
            .cloned()
            .collect();
        let keep = usize::try_from(limit).unwrap_or(0);
        if of_kind.len() <= keep {
            return Vec::new();
        }
        of_kind.sort_by(|a, b| by_start_time(a, b));
        of_kind.truncate(of_kind.len() - keep);
        of_kind
    };
    let spec = &cron_job.spec;
    let mut victims = oldest_beyond("Complete", spec.successful_jobs_history_limit);
    victims.extend(oldest_beyond("Failed", spec.failed_jobs_history_limit));
    victims
}

/// Why a schedule cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ScheduleError {
    /// `spec.timeZone` does not load: Go's message.
    UnknownTimeZone(String),
    /// The schedule does not parse (or its `TZ=` zone does not load): robfig's message.
    Unparseable(String),
}

/// The CronJob's schedule and the zone to read it in (upstream `formatSchedule` then
/// `cron.ParseStandard`): the schedule's own `TZ=` zone, else `spec.timeZone`, else UTC.
pub(crate) fn schedule_of(
    cron_job: &CronJob,
    load: &dyn Fn(&str) -> Result<TimeZone, String>,
) -> Result<(Schedule, TimeZone), ScheduleError> {
    let schedule = Schedule::parse(&cron_job.spec.schedule).map_err(ScheduleError::Unparseable)?;
    let zone = match (schedule.time_zone(), cron_job.spec.time_zone.as_deref()) {
        (Some(name), _) => load(name).map_err(|e| {
            ScheduleError::Unparseable(format!("provided bad location {name}: {e}"))
        })?,
        (None, Some(name)) => load(name).map_err(ScheduleError::UnknownTimeZone)?,
        (None, None) => TimeZone::UTC,
    };
    Ok((schedule, zone))
}

/// The times between the last one handled and now (upstream `mostRecentScheduleTime`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MostRecent {
    /// `status.lastScheduleTime`, else the creation time (later: now - the starting
    /// deadline, when asked for and later).
    pub(crate) earliest: Timestamp,
    /// The latest scheduled time after `earliest` and not after now.
    pub(crate) time: Option<Timestamp>,
    /// More than [`MAX_MISSED`] times passed since `earliest`.
    pub(crate) too_many: bool,
}

/// The most recent scheduled time after the last one handled and not after `now`.
/// Unlike upstream's estimate from the first two times, the times are counted (up to
/// [`MAX_MISSED`]), and beyond that the latest one is found by looking back from now in
/// doubling windows, so that irregular schedules (`30 6-16/4 * * 1-5`) are exact too.
///
/// Errors: the schedule never fires ([`NEVER_FIRES`], upstream's message).
pub(crate) fn most_recent_schedule_time(
    cron_job: &CronJob,
    status: &CronJobStatus,
    now: Timestamp,
    schedule: &Schedule,
    zone: &TimeZone,
    include_deadline: bool,
) -> Result<MostRecent, String> {
    let mut earliest = status
        .last_schedule_time
        .as_ref()
        .or(cron_job.metadata.creation_timestamp.as_ref())
        .map_or(now, |t| t.0);
    if include_deadline && let Some(deadline) = cron_job.spec.starting_deadline_seconds {
        let floor = Timestamp::from_second(now.as_second().saturating_sub(deadline))
            .unwrap_or(Timestamp::MIN);
        earliest = earliest.max(floor);
    }
    let next = |t: Timestamp| schedule.next(t, zone);
    let none = MostRecent {
        earliest,
        time: None,
        too_many: false,
    };
    let Some(first) = next(earliest) else {
        return Err(NEVER_FIRES.to_owned());
    };
    if now < first {
        return Ok(none);
    }
    let mut last = first;
    let mut count = 1;
    loop {
        match next(last) {
            Some(t) if t <= now => {
                if count == MAX_MISSED {
                    break;
                }
                last = t;
                count += 1;
            }
            _ => {
                return Ok(MostRecent {
                    time: Some(last),
                    ..none
                });
            }
        }
    }
    // More than MAX_MISSED: look back from now in windows that double, starting from the
    // gap between the first two times.
    let gap = next(first).map_or(60, |second| (second.as_second() - first.as_second()).max(1));
    let mut window = gap;
    loop {
        let start = Timestamp::from_second(now.as_second().saturating_sub(window))
            .unwrap_or(Timestamp::MIN)
            .max(last);
        if let Some(found) = next(start).filter(|t| *t <= now) {
            let mut latest = found;
            // Bounded by the times in one window; the budget only guards odd zones.
            for _ in 0..100_000 {
                match next(latest) {
                    Some(t) if t <= now => latest = t,
                    _ => break,
                }
            }
            return Ok(MostRecent {
                time: Some(latest),
                too_many: true,
                ..none
            });
        }
        if start == last {
            // next(last) <= now is known, so this cannot happen; stop rather than spin.
            return Ok(MostRecent {
                time: Some(last),
                too_many: true,
                ..none
            });
        }
        window = window.saturating_mul(2);
    }
}

/// How long until the sync after `now` (upstream `nextScheduleTimeDuration`): the next
/// scheduled time after the most recent one (or after the last handled one) plus
/// [`NEXT_SCHEDULE_DELTA`]; None when the schedule never fires.
pub(crate) fn requeue_after(
    cron_job: &CronJob,
    status: &CronJobStatus,
    now: Timestamp,
    schedule: &Schedule,
    zone: &TimeZone,
) -> Option<Duration> {
    let base = match most_recent_schedule_time(cron_job, status, now, schedule, zone, false) {
        Ok(m) => m.time.unwrap_or(m.earliest),
        Err(_) => now,
    };
    let next = schedule.next(base, zone)?;
    let nanos = next.as_nanosecond() - now.as_nanosecond();
    let wait = Duration::from_nanos(u64::try_from(nanos.max(0)).unwrap_or(u64::MAX));
    Some(wait + NEXT_SCHEDULE_DELTA)
}

/// What to do about the schedule (the second half of upstream `syncCronJob`).
#[derive(Debug, Clone)]
pub(crate) enum Outcome {
    /// Nothing until the CronJob changes (suspended, a bad zone or schedule).
    Stop,
    /// No Job now; sync again after this long (None: never).
    Wait(Option<Duration>),
    /// Create the Job of `scheduled`, first deleting the active Jobs when `replace`.
    Start {
        /// The scheduled time.
        scheduled: Timestamp,
        /// `concurrencyPolicy: Replace` with active Jobs.
        replace: bool,
        /// The schedule, for the requeue after the start.
        schedule: Schedule,
        /// The zone the schedule is read in.
        zone: TimeZone,
        /// The zone of the scheduled-timestamp annotation (`spec.timeZone` or UTC).
        annotation_zone: TimeZone,
    },
}

/// Decides, from the CronJob, its status as observed and the time, whether a Job is due:
/// the events to record and the [`Outcome`].
pub(crate) fn decide(
    cron_job: &CronJob,
    status: &CronJobStatus,
    now: Timestamp,
    load: &dyn Fn(&str) -> Result<TimeZone, String>,
) -> (Vec<Note>, Outcome) {
    let spec = &cron_job.spec;
    let mut notes = Vec::new();
    let mut annotation_zone = TimeZone::UTC;
    if let Some(name) = spec.time_zone.as_deref() {
        match load(name) {
            Ok(zone) => annotation_zone = zone,
            Err(e) => {
                notes.push(warning(
                    "UnknownTimeZone",
                    format!("invalid timeZone: {name:?}: {e}"),
                ));
                return (notes, Outcome::Stop);
            }
        }
    }
    if spec.suspend == Some(true) {
        return (notes, Outcome::Stop);
    }
    if spec.schedule.contains("TZ") {
        notes.push(warning(
            "UnsupportedSchedule",
            format!(
                "CRON_TZ or TZ used in schedule {:?} is not officially supported, see \
                 https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for \
                 more details",
                spec.schedule
            ),
        ));
    }
    let (schedule, zone) = match schedule_of(cron_job, load) {
        Ok(found) => found,
        Err(ScheduleError::Unparseable(e) | ScheduleError::UnknownTimeZone(e)) => {
            notes.push(warning(
                "UnparseableSchedule",
                format!("unparseable schedule: {:?} : {e}", spec.schedule),
            ));
            return (notes, Outcome::Stop);
        }
    };
    let requeue = || requeue_after(cron_job, status, now, &schedule, &zone);
    let recent = match most_recent_schedule_time(cron_job, status, now, &schedule, &zone, true) {
        Ok(recent) => recent,
        Err(e) => {
            notes.push(warning(
                "InvalidSchedule",
                format!("invalid schedule: {} : {e}", spec.schedule),
            ));
            return (notes, Outcome::Stop);
        }
    };
    let Some(scheduled) = recent.time else {
        return (notes, Outcome::Wait(requeue()));
    };
    if recent.too_many {
        notes.push(warning(
            "TooManyMissedTimes",
            "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or \
             check clock skew"
                .to_owned(),
        ));
    }
    if let Some(deadline) = spec.starting_deadline_seconds
        && scheduled.as_second().saturating_add(deadline) < now.as_second()
    {
        let at = scheduled
            .to_zoned(TimeZone::UTC)
            .strftime("%a, %d %b %Y %H:%M:%S %z")
            .to_string();
        notes.push(warning(
            "MissSchedule",
            format!("Missed scheduled time to start a job: {at}"),
        ));
        return (notes, Outcome::Wait(requeue()));
    }
    let name = job_name(cron_job.metadata.name.as_deref().unwrap_or(""), scheduled);
    let active = status.active.as_deref().unwrap_or(&[]);
    let processed = active.iter().any(|r| {
        r.name.as_deref() == Some(name.as_str()) && r.namespace == cron_job.metadata.namespace
    }) || status.last_schedule_time.as_ref().map(|t| t.0) == Some(scheduled);
    if processed {
        return (notes, Outcome::Wait(requeue()));
    }
    let policy = spec.concurrency_policy.as_deref().unwrap_or("Allow");
    if policy == "Forbid" && !active.is_empty() {
        notes.push(normal(
            "JobAlreadyActive",
            "Not starting job because prior execution is running and concurrency policy is \
             Forbid"
                .to_owned(),
        ));
        return (notes, Outcome::Wait(requeue()));
    }
    let outcome = Outcome::Start {
        scheduled,
        replace: policy == "Replace" && !active.is_empty(),
        schedule,
        zone,
        annotation_zone,
    };
    (notes, outcome)
}

/// The CronJob controller; see the module doc.
pub struct CronJobController {
    client: kube::Client,
    cron_jobs: Arc<SharedInformer<CronJob>>,
    jobs: Arc<SharedInformer<Job>>,
    queue: Arc<WorkQueue<String>>,
    recorder: EventRecorder,
}

impl std::fmt::Debug for CronJobController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CronJobController").finish_non_exhaustive()
    }
}

/// What the event handlers need, apart from the controller.
#[derive(Clone)]
struct Handlers {
    cron_jobs: Arc<SharedInformer<CronJob>>,
    queue: Arc<WorkQueue<String>>,
    recorder: EventRecorder,
}

impl Handlers {
    /// Queues the CronJob controlling `job`, if the cache has it with the referenced UID.
    fn queue_owner(&self, job: &Job) {
        if let Some(cj) = resolve_controller_ref(self.cron_jobs.store(), &job.metadata) {
            self.queue.add(object_key(cj.as_ref()));
        }
    }

    /// Upstream `addJob`, `updateJob`, `deleteJob`.
    fn on_job(&self, delta: &Delta<Job>) {
        match delta {
            Delta::Added(job) | Delta::Deleted(job) => self.queue_owner(job),
            Delta::Updated(old, new) => {
                if old.metadata.resource_version == new.metadata.resource_version {
                    return;
                }
                if controller_of(&old.metadata) != controller_of(&new.metadata) {
                    self.queue_owner(old);
                }
                self.queue_owner(new);
            }
        }
    }

    /// Upstream's CronJob handlers: a new schedule or zone requeues the CronJob for its
    /// next time (an unparseable one records `UnParseableCronJobSchedule`); any other
    /// change syncs it now.
    fn on_cron_job(&self, delta: &Delta<CronJob>) {
        match delta {
            Delta::Added(cj) | Delta::Deleted(cj) => self.queue.add(object_key(cj.as_ref())),
            Delta::Updated(old, new) => {
                let key = object_key(new.as_ref());
                if old.spec.schedule == new.spec.schedule
                    && old.spec.time_zone == new.spec.time_zone
                {
                    self.queue.add(key);
                    return;
                }
                match schedule_of(new, &load_location) {
                    Ok((schedule, zone)) => {
                        let status = new.status.clone().unwrap_or_default();
                        let now = Timestamp::now();
                        match requeue_after(new, &status, now, &schedule, &zone) {
                            Some(wait) => self.queue.add_after(key, wait),
                            None => self.queue.add(key),
                        }
                    }
                    Err(ScheduleError::UnknownTimeZone(_)) => self.queue.add(key),
                    Err(ScheduleError::Unparseable(_)) => self.recorder.eventf(
                        reference(new.as_ref()),
                        None,
                        EventDetails {
                            type_: "Warning",
                            reason: "UnParseableCronJobSchedule",
                            action: "Sync",
                            note: &format!(
                                "unparseable schedule for cronjob: {}",
                                new.spec.schedule
                            ),
                        },
                    ),
                }
            }
        }
    }
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

fn is_already_exists(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409 && s.reason == "AlreadyExists")
}

fn namespace_terminating(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.details.as_ref().is_some_and(|d| {
        d.causes.iter().any(|c| c.reason == "NamespaceTerminating")
    }))
}

impl CronJobController {
    /// The controller over the factory's CronJob and Job informers, its handlers
    /// registered.
    pub fn new(
        client: kube::Client,
        factory: &SharedInformerFactory,
        recorder: EventRecorder,
        queue_metrics: Arc<dyn QueueMetrics>,
    ) -> Arc<Self> {
        let handlers = Handlers {
            cron_jobs: factory.informer::<CronJob>(),
            queue: Arc::new(WorkQueue::new("cronjob").with_metrics(queue_metrics)),
            recorder: recorder.clone(),
        };
        let jobs = factory.informer::<Job>();
        let h = handlers.clone();
        handlers
            .cron_jobs
            .add_event_handler(Box::new(move |d| h.on_cron_job(d)));
        let h = handlers.clone();
        jobs.add_event_handler(Box::new(move |d| h.on_job(d)));
        Arc::new(Self {
            client,
            cron_jobs: handlers.cron_jobs,
            jobs,
            queue: handlers.queue,
            recorder,
        })
    }

    /// Waits for the informers, then syncs with `workers` workers until `cancel`
    /// (`--concurrent-cron-job-syncs`, default 5).
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        run_controller(
            NAME,
            &[&*self.cron_jobs, &*self.jobs],
            &self.queue,
            workers,
            cancel,
            &self,
            |this, key| async move { this.sync(&key).await },
        )
        .await;
    }

    fn event(&self, cj: &CronJob, note: &Note) {
        self.recorder
            .event(cj, note.type_, note.reason, &note.message);
    }

    /// The Jobs of the CronJob's namespace whose controller reference names it (upstream
    /// `getJobsToBeReconciled`, which also keeps Jobs whose labels no longer match).
    fn owned_jobs(&self, cj: &CronJob) -> Vec<Arc<Job>> {
        let ns = cj.metadata.namespace.as_deref();
        let name = cj.metadata.name.as_deref().unwrap_or("");
        self.jobs
            .store()
            .list()
            .into_iter()
            .filter(|j| {
                j.metadata.namespace.as_deref() == ns
                    && controller_of(&j.metadata)
                        .is_some_and(|r| r.kind == "CronJob" && r.name == name)
            })
            .collect()
    }

    /// One sync of the CronJob `key` (upstream `sync`, `cleanupFinishedJobs` and
    /// `syncCronJob`).
    async fn sync(&self, key: &str) -> Result<(), Error> {
        let Some(cached) = self.cron_jobs.store().get(key) else {
            return Ok(());
        };
        let ns = cached.metadata.namespace.clone().unwrap_or_default();
        let name = cached.metadata.name.clone().unwrap_or_default();
        let cron_api: Api<CronJob> = Api::namespaced(self.client.clone(), &ns);
        let job_api: Api<Job> = Api::namespaced(self.client.clone(), &ns);
        let jobs = self.owned_jobs(&cached);
        let mut cj = (*cached).clone();
        // A Job the cached status does not list may be one this controller just created:
        // read the CronJob again before calling it unexpected.
        let cached_status = cj.status.clone().unwrap_or_default();
        if jobs
            .iter()
            .any(|j| !crate::job::is_job_finished(j) && !in_active(&cached_status, uid_of(j)))
        {
            match cron_api.get(&name).await {
                Ok(fresh) if fresh.metadata.uid == cj.metadata.uid => cj = fresh,
                Ok(_) => {}
                Err(e) if is_not_found(&e) => return Ok(()),
                Err(e) => return Err(e.into()),
            }
        }
        let original = normalized(cj.status.clone().unwrap_or_default());
        let mut status = original.clone();
        self.cleanup_finished(&cj, &mut status, &jobs, &job_api)
            .await;
        let observed = observe_jobs(&mut status, &jobs);
        for note in &observed.notes {
            self.event(&cj, note);
        }
        let mut result = Ok(None);
        for r in &observed.missing {
            let job_name = r.name.as_deref().unwrap_or("");
            match job_api.get(job_name).await {
                Err(e) if is_not_found(&e) => {
                    let note = normal("MissingJob", format!("Active job went missing: {job_name}"));
                    self.event(&cj, &note);
                    remove_from_active(&mut status, r.uid.as_deref().unwrap_or(""));
                }
                Err(e) => {
                    result = Err(Error::from(e));
                    break;
                }
                // Not in the cache yet, but there.
                Ok(_) => {}
            }
        }
        if result.is_ok() && cj.metadata.deletion_timestamp.is_none() {
            result = self.sync_schedule(&cj, &mut status, &job_api).await;
        }
        let status = normalized(status);
        if status != original {
            self.update_status(&cj, status).await?;
        }
        match result {
            Ok(Some(wait)) => {
                tracing::debug!(cronjob = key, ?wait, "requeued for the next scheduled time");
                self.queue.add_after(key.to_owned(), wait);
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Deletes the finished Jobs beyond the history limits, in the background, and drops
    /// them from the active list (upstream `cleanupFinishedJobs`); failures are events.
    async fn cleanup_finished(
        &self,
        cj: &CronJob,
        status: &mut CronJobStatus,
        jobs: &[Arc<Job>],
        job_api: &Api<Job>,
    ) {
        for job in history_victims(cj, jobs) {
            if self.delete_job(cj, &job, job_api).await {
                remove_from_active(status, uid_of(&job));
            }
        }
    }

    /// Deletes `job` with background propagation (upstream `deleteJob`): true when it is
    /// gone, with `SuccessfulDelete`; `FailedDelete` otherwise.
    async fn delete_job(&self, cj: &CronJob, job: &Job, job_api: &Api<Job>) -> bool {
        let name = job.metadata.name.as_deref().unwrap_or("");
        match job_api.delete(name, &DeleteParams::background()).await {
            Ok(_) => {
                let note = normal("SuccessfulDelete", format!("Deleted job {name}"));
                self.event(cj, &note);
                true
            }
            Err(e) if is_not_found(&e) => true,
            Err(e) => {
                let note = warning("FailedDelete", format!("Deleted job: {e}"));
                self.event(cj, &note);
                tracing::warn!(job = name, error = %e, "could not delete a job of a cronjob");
                false
            }
        }
    }

    /// Starts the Job that is due, if any; the wait until the next sync.
    async fn sync_schedule(
        &self,
        cj: &CronJob,
        status: &mut CronJobStatus,
        job_api: &Api<Job>,
    ) -> Result<Option<Duration>, Error> {
        let now = Timestamp::now();
        let (notes, outcome) = decide(cj, status, now, &load_location);
        for note in &notes {
            self.event(cj, note);
        }
        let (scheduled, replace, schedule, zone, annotation_zone) = match outcome {
            Outcome::Stop => return Ok(None),
            Outcome::Wait(wait) => return Ok(wait),
            Outcome::Start {
                scheduled,
                replace,
                schedule,
                zone,
                annotation_zone,
            } => (scheduled, replace, schedule, zone, annotation_zone),
        };
        if replace {
            for r in status.active.clone().unwrap_or_default() {
                let job_name = r.name.as_deref().unwrap_or("");
                let job = match job_api.get(job_name).await {
                    Ok(job) => job,
                    Err(e) if is_not_found(&e) => {
                        remove_from_active(status, r.uid.as_deref().unwrap_or(""));
                        continue;
                    }
                    Err(e) => {
                        self.event(cj, &warning("FailedGet", format!("Get job: {e}")));
                        return Err(e.into());
                    }
                };
                if !self.delete_job(cj, &job, job_api).await {
                    return Err(Error::Invalid(format!(
                        "could not replace job {}/{job_name}",
                        r.namespace.as_deref().unwrap_or("")
                    )));
                }
                remove_from_active(status, r.uid.as_deref().unwrap_or(""));
            }
        }
        let job = job_from_template(cj, scheduled, &annotation_zone);
        let job_name = job.metadata.name.clone().unwrap_or_default();
        let created = match job_api.create(&PostParams::default(), &job).await {
            Ok(created) => {
                let note = normal("SuccessfulCreate", format!("Created job {job_name}"));
                self.event(cj, &note);
                created
            }
            Err(e) if namespace_terminating(&e) => return Err(e.into()),
            Err(e) if is_already_exists(&e) => {
                // Created before, but the status update was lost; unless someone else
                // made it.
                tracing::info!(job = job_name, "job already exists");
                let existing = job_api.get(&job_name).await?;
                let ours = controller_of(&existing.metadata)
                    .is_some_and(|r| Some(r.uid.as_str()) == cj.metadata.uid.as_deref());
                if !ours || in_active(status, uid_of(&existing)) {
                    return Ok(requeue_after(cj, status, now, &schedule, &zone));
                }
                existing
            }
            Err(e) => {
                self.event(
                    cj,
                    &warning("FailedCreate", format!("Error creating job: {e}")),
                );
                return Err(e.into());
            }
        };
        status
            .active
            .get_or_insert_with(Vec::new)
            .push(reference(&created));
        status.last_schedule_time = Some(Time(scheduled));
        Ok(requeue_after(cj, status, now, &schedule, &zone))
    }

    /// Writes `status` (upstream `UpdateStatus`), retrying once on a conflict with the
    /// CronJob as it is now.
    async fn update_status(&self, cj: &CronJob, status: CronJobStatus) -> Result<(), Error> {
        update_status_retrying(&self.client, cj, |cj| cj.status = Some(status.clone())).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};
    use serde_json::json;

    fn ts(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn cron_job(spec: serde_json::Value) -> CronJob {
        let mut cj: CronJob = serde_json::from_value(json!({
            "apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {
                "name": "nightly", "namespace": "ns", "uid": "cj-uid",
                "creationTimestamp": "2024-05-01T00:00:30Z",
            },
            "spec": {
                "schedule": "*/5 * * * *",
                "jobTemplate": {
                    "metadata": {"labels": {"app": "x"}, "annotations": {"a": "b"}},
                    "spec": {"template": {"spec": {
                        "containers": [{"name": "c", "image": "busybox"}],
                        "restartPolicy": "Never",
                    }}},
                },
            },
        }))
        .unwrap();
        if let serde_json::Value::Object(fields) = spec {
            let mut value = serde_json::to_value(&cj.spec).unwrap();
            for (k, v) in fields {
                value[k] = v;
            }
            cj.spec = serde_json::from_value(value).unwrap();
        }
        cj
    }

    fn job(name: &str, uid: &str, finished: Option<&str>, start: Option<&str>) -> Arc<Job> {
        let conditions = finished.map(|t| {
            vec![JobCondition {
                type_: t.to_owned(),
                status: "True".to_owned(),
                last_transition_time: Some(Time(ts("2024-05-01T01:00:00Z"))),
                ..Default::default()
            }]
        });
        Arc::new(Job {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some("ns".to_owned()),
                uid: Some(uid.to_owned()),
                ..Default::default()
            },
            spec: None,
            status: Some(JobStatus {
                conditions,
                start_time: start.map(|s| Time(ts(s))),
                completion_time: (finished == Some("Complete"))
                    .then(|| Time(ts("2024-05-01T01:00:00Z"))),
                ..Default::default()
            }),
        })
    }

    fn active_ref(name: &str, uid: &str) -> ObjectReference {
        ObjectReference {
            api_version: Some("batch/v1".to_owned()),
            kind: Some("Job".to_owned()),
            name: Some(name.to_owned()),
            namespace: Some("ns".to_owned()),
            uid: Some(uid.to_owned()),
            ..Default::default()
        }
    }

    /// New York's rules, without the system tzdb.
    fn test_zones(name: &str) -> Result<TimeZone, String> {
        match name {
            "America/New_York" => Ok(TimeZone::posix("EST5EDT,M3.2.0,M11.1.0").unwrap()),
            "UTC" | "" => Ok(TimeZone::UTC),
            other => Err(format!("unknown time zone {other}")),
        }
    }

    fn decide_at(cj: &CronJob, status: &CronJobStatus, now: &str) -> (Vec<Note>, Outcome) {
        decide(cj, status, ts(now), &test_zones)
    }

    fn reasons(notes: &[Note]) -> Vec<&str> {
        notes.iter().map(|n| n.reason).collect()
    }

    fn started(outcome: &Outcome) -> Option<(Timestamp, bool)> {
        match outcome {
            Outcome::Start {
                scheduled, replace, ..
            } => Some((*scheduled, *replace)),
            _ => None,
        }
    }

    fn waited(outcome: &Outcome) -> Option<Duration> {
        match outcome {
            Outcome::Wait(w) => *w,
            _ => None,
        }
    }

    #[test]
    fn job_names_count_minutes_since_the_epoch() {
        assert_eq!(job_name("cj", ts("2024-05-01T00:05:00Z")), "cj-28575365");
        assert_eq!(job_name("cj", ts("1970-01-01T00:01:59Z")), "cj-1");
    }

    #[test]
    fn the_job_comes_from_the_template() {
        let cj = cron_job(json!({"timeZone": "America/New_York"}));
        let zone = test_zones("America/New_York").unwrap();
        let job = job_from_template(&cj, ts("2024-05-01T04:05:00Z"), &zone);
        assert_eq!(job.metadata.name.as_deref(), Some("nightly-28575605"));
        assert_eq!(job.metadata.namespace.as_deref(), Some("ns"));
        let labels = job.metadata.labels.clone().unwrap();
        assert_eq!(labels.get("app").map(String::as_str), Some("x"));
        let annotations = job.metadata.annotations.clone().unwrap();
        assert_eq!(annotations.get("a").map(String::as_str), Some("b"));
        assert_eq!(
            annotations
                .get(SCHEDULED_TIMESTAMP_ANNOTATION)
                .map(String::as_str),
            Some("2024-05-01T00:05:00-04:00")
        );
        let owner = &job.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (
                owner.api_version.as_str(),
                owner.kind.as_str(),
                owner.name.as_str(),
                owner.uid.as_str(),
                owner.controller,
                owner.block_owner_deletion
            ),
            (
                "batch/v1",
                "CronJob",
                "nightly",
                "cj-uid",
                Some(true),
                Some(true)
            )
        );
        assert_eq!(job.spec, cj.spec.job_template.spec);
        let utc = job_from_template(&cj, ts("2024-05-01T04:05:00Z"), &TimeZone::UTC);
        assert_eq!(
            utc.metadata.annotations.unwrap()[SCHEDULED_TIMESTAMP_ANNOTATION],
            "2024-05-01T04:05:00Z"
        );
    }

    #[test]
    fn finished_jobs_leave_the_active_list() {
        let mut status = CronJobStatus {
            active: Some(vec![
                active_ref("done", "u1"),
                active_ref("running", "u2"),
                active_ref("gone", "u3"),
            ]),
            last_successful_time: Some(Time(ts("2024-05-01T00:30:00Z"))),
            ..Default::default()
        };
        let jobs = vec![
            job("done", "u1", Some("Complete"), None),
            job("running", "u2", None, None),
            job("stray", "u4", None, None),
            job("failed", "u5", Some("Failed"), None),
        ];
        let observed = observe_jobs(&mut status, &jobs);
        assert_eq!(
            observed.notes,
            vec![
                normal(
                    "SawCompletedJob",
                    "Saw completed job: done, condition: Complete".to_owned()
                ),
                warning(
                    "UnexpectedJob",
                    "Saw a job that the controller did not create or forgot: stray".to_owned()
                ),
            ]
        );
        let names: Vec<_> = status
            .active
            .iter()
            .flatten()
            .filter_map(|r| r.name.as_deref())
            .collect();
        assert_eq!(names, ["running", "gone"]);
        assert_eq!(observed.missing, vec![active_ref("gone", "u3")]);
        // The latest completion of a successful Job.
        assert_eq!(
            status.last_successful_time,
            Some(Time(ts("2024-05-01T01:00:00Z")))
        );
        // An older completion does not move it back.
        let mut later = CronJobStatus {
            last_successful_time: Some(Time(ts("2024-05-02T00:00:00Z"))),
            ..Default::default()
        };
        observe_jobs(&mut later, &jobs);
        assert_eq!(
            later.last_successful_time,
            Some(Time(ts("2024-05-02T00:00:00Z")))
        );
    }

    #[test]
    fn history_keeps_the_newest_finished_jobs() {
        let cj = cron_job(json!({
            "successfulJobsHistoryLimit": 2, "failedJobsHistoryLimit": 0,
        }));
        let jobs = vec![
            job("s3", "1", Some("Complete"), Some("2024-05-01T03:00:00Z")),
            job("s1", "2", Some("Complete"), Some("2024-05-01T01:00:00Z")),
            job("s-unstarted", "3", Some("Complete"), None),
            job("s2", "4", Some("Complete"), Some("2024-05-01T02:00:00Z")),
            job("f1", "5", Some("Failed"), Some("2024-05-01T01:00:00Z")),
            job("running", "6", None, Some("2024-05-01T00:00:00Z")),
        ];
        let victims: Vec<_> = history_victims(&cj, &jobs)
            .iter()
            .map(|j| j.metadata.name.clone().unwrap())
            .collect();
        // Started Jobs first, oldest first; a Job never started counts as newest.
        assert_eq!(victims, ["s1", "s2", "f1"]);
        // No limits: nothing goes.
        let unlimited = cron_job(json!({}));
        assert!(history_victims(&unlimited, &jobs).is_empty());
    }

    #[test]
    fn schedule_zones_come_from_the_prefix_then_the_field() {
        let (_, zone) = schedule_of(&cron_job(json!({})), &test_zones).unwrap();
        assert_eq!(zone, TimeZone::UTC);
        let cj = cron_job(json!({"timeZone": "America/New_York"}));
        let (_, zone) = schedule_of(&cj, &test_zones).unwrap();
        assert_eq!(zone, test_zones("America/New_York").unwrap());
        let cj = cron_job(json!({"schedule": "TZ=America/New_York 0 * * * *"}));
        let (schedule, zone) = schedule_of(&cj, &test_zones).unwrap();
        assert_eq!(schedule.time_zone(), Some("America/New_York"));
        assert_eq!(zone, test_zones("America/New_York").unwrap());
        let cj = cron_job(json!({"schedule": "CRON_TZ=Mars/Olympus 0 * * * *"}));
        assert_eq!(
            schedule_of(&cj, &test_zones).unwrap_err(),
            ScheduleError::Unparseable(
                "provided bad location Mars/Olympus: unknown time zone Mars/Olympus".to_owned()
            )
        );
        let cj = cron_job(json!({"timeZone": "Mars/Olympus"}));
        assert_eq!(
            schedule_of(&cj, &test_zones).unwrap_err(),
            ScheduleError::UnknownTimeZone("unknown time zone Mars/Olympus".to_owned())
        );
    }

    fn recent(cj: &CronJob, status: &CronJobStatus, now: &str, deadline: bool) -> MostRecent {
        let (schedule, zone) = schedule_of(cj, &test_zones).unwrap();
        most_recent_schedule_time(cj, status, ts(now), &schedule, &zone, deadline).unwrap()
    }

    #[test]
    fn the_most_recent_missed_time_is_due() {
        let cj = cron_job(json!({}));
        let none = CronJobStatus::default();
        // Created at 00:00:30: nothing before 00:05.
        let m = recent(&cj, &none, "2024-05-01T00:04:59Z", true);
        assert_eq!((m.time, m.too_many), (None, false));
        let m = recent(&cj, &none, "2024-05-01T00:05:00Z", true);
        assert_eq!(m.time, Some(ts("2024-05-01T00:05:00Z")));
        // Several missed: the latest one only.
        let m = recent(&cj, &none, "2024-05-01T01:07:00Z", true);
        assert_eq!(
            (m.time, m.too_many),
            (Some(ts("2024-05-01T01:05:00Z")), false)
        );
        // After the last scheduled time.
        let last = CronJobStatus {
            last_schedule_time: Some(Time(ts("2024-05-01T01:05:00Z"))),
            ..Default::default()
        };
        let m = recent(&cj, &last, "2024-05-01T01:09:59Z", true);
        assert_eq!(m.time, None);
        assert_eq!(m.earliest, ts("2024-05-01T01:05:00Z"));
    }

    #[test]
    fn more_than_a_hundred_missed_times_start_only_the_latest() {
        let cj = cron_job(json!({"schedule": "* * * * *"}));
        let none = CronJobStatus::default();
        // 100 minutes missed: not too many.
        let m = recent(&cj, &none, "2024-05-01T01:40:00Z", true);
        assert_eq!(
            (m.time, m.too_many),
            (Some(ts("2024-05-01T01:40:00Z")), false)
        );
        let m = recent(&cj, &none, "2024-05-01T01:41:00Z", true);
        assert_eq!(
            (m.time, m.too_many),
            (Some(ts("2024-05-01T01:41:00Z")), true)
        );
        // Years of minutes: still the exact latest one.
        let m = recent(&cj, &none, "2027-02-03T04:05:06Z", true);
        assert_eq!(
            (m.time, m.too_many),
            (Some(ts("2027-02-03T04:05:00Z")), true)
        );
        // An irregular schedule, whose first gap is shorter than the later ones.
        let cj = cron_job(json!({"schedule": "30 6-16/4 * * 1-5"}));
        // 44 weekdays of three times each by 2 July.
        let m = recent(&cj, &none, "2024-07-02T06:00:00Z", true);
        assert_eq!(
            (m.time, m.too_many),
            (Some(ts("2024-07-01T14:30:00Z")), true)
        );
        let m = recent(&cj, &none, "2024-05-02T06:00:00Z", true);
        assert_eq!(
            (m.time, m.too_many),
            (Some(ts("2024-05-01T14:30:00Z")), false)
        );
    }

    #[test]
    fn the_starting_deadline_bounds_the_missed_times() {
        let cj = cron_job(json!({"schedule": "0 * * * *", "startingDeadlineSeconds": 600}));
        let none = CronJobStatus::default();
        // 05:00 was missed by more than ten minutes: not due; 06:00 will be.
        let m = recent(&cj, &none, "2024-05-01T05:20:00Z", true);
        assert_eq!(m.time, None);
        assert_eq!(m.earliest, ts("2024-05-01T05:10:00Z"));
        let m = recent(&cj, &none, "2024-05-01T05:09:00Z", true);
        assert_eq!(m.time, Some(ts("2024-05-01T05:00:00Z")));
        // The requeue ignores the deadline: the next time after the latest missed one.
        let (schedule, zone) = schedule_of(&cj, &test_zones).unwrap();
        let wait = requeue_after(&cj, &none, ts("2024-05-01T05:20:00Z"), &schedule, &zone);
        assert_eq!(
            wait,
            Some(Duration::from_secs(40 * 60) + NEXT_SCHEDULE_DELTA)
        );
        let (notes, outcome) = decide_at(&cj, &none, "2024-05-01T05:20:00Z");
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(
            waited(&outcome),
            Some(Duration::from_secs(40 * 60) + NEXT_SCHEDULE_DELTA)
        );
    }

    #[test]
    fn a_due_time_starts_a_job_and_requeues_for_the_next() {
        let cj = cron_job(json!({}));
        let none = CronJobStatus::default();
        let (notes, outcome) = decide_at(&cj, &none, "2024-05-01T00:05:02Z");
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(started(&outcome), Some((ts("2024-05-01T00:05:00Z"), false)));
        // Once started (lastScheduleTime set), the next sync is at 00:10 + 100 ms.
        let after = CronJobStatus {
            last_schedule_time: Some(Time(ts("2024-05-01T00:05:00Z"))),
            active: Some(vec![active_ref("nightly-28575365", "u")]),
            ..Default::default()
        };
        let (notes, outcome) = decide_at(&cj, &after, "2024-05-01T00:05:02Z");
        assert!(notes.is_empty());
        assert_eq!(
            waited(&outcome),
            Some(Duration::from_millis(4 * 60_000 + 58_000 + 100))
        );
        // Not due yet: wait for 00:05.
        let (_, outcome) = decide_at(&cj, &none, "2024-05-01T00:01:00Z");
        assert_eq!(waited(&outcome), Some(Duration::from_millis(240_100)));
    }

    #[test]
    fn concurrency_policies() {
        let running = CronJobStatus {
            last_schedule_time: Some(Time(ts("2024-05-01T00:05:00Z"))),
            active: Some(vec![active_ref("nightly-28575365", "u")]),
            ..Default::default()
        };
        let now = "2024-05-01T00:10:01Z";
        let allow = cron_job(json!({"concurrencyPolicy": "Allow"}));
        let (_, outcome) = decide_at(&allow, &running, now);
        assert_eq!(started(&outcome), Some((ts("2024-05-01T00:10:00Z"), false)));
        let forbid = cron_job(json!({"concurrencyPolicy": "Forbid"}));
        let (notes, outcome) = decide_at(&forbid, &running, now);
        assert_eq!(reasons(&notes), ["JobAlreadyActive"]);
        assert_eq!(
            waited(&outcome),
            Some(Duration::from_millis(4 * 60_000 + 59_000 + 100))
        );
        let replace = cron_job(json!({"concurrencyPolicy": "Replace"}));
        let (_, outcome) = decide_at(&replace, &running, now);
        assert_eq!(started(&outcome), Some((ts("2024-05-01T00:10:00Z"), true)));
        // Forbid with nothing active starts.
        let idle = CronJobStatus {
            active: None,
            ..running.clone()
        };
        let (notes, outcome) = decide_at(&forbid, &idle, now);
        assert!(notes.is_empty());
        assert_eq!(started(&outcome), Some((ts("2024-05-01T00:10:00Z"), false)));
    }

    #[test]
    fn a_time_already_processed_starts_nothing() {
        let cj = cron_job(json!({}));
        // The Job of 00:05 is listed, though lastScheduleTime lags.
        let listed = CronJobStatus {
            active: Some(vec![active_ref("nightly-28575365", "u")]),
            ..Default::default()
        };
        let (_, outcome) = decide_at(&cj, &listed, "2024-05-01T00:06:00Z");
        assert!(started(&outcome).is_none());
        assert!(waited(&outcome).is_some());
    }

    #[test]
    fn suspended_and_broken_cron_jobs_stop() {
        let none = CronJobStatus::default();
        let now = "2024-05-01T00:05:02Z";
        let (notes, outcome) = decide_at(&cron_job(json!({"suspend": true})), &none, now);
        assert!(notes.is_empty());
        assert!(matches!(outcome, Outcome::Stop));
        let (notes, outcome) =
            decide_at(&cron_job(json!({"timeZone": "Mars/Olympus"})), &none, now);
        assert_eq!(
            notes,
            vec![warning(
                "UnknownTimeZone",
                "invalid timeZone: \"Mars/Olympus\": unknown time zone Mars/Olympus".to_owned()
            )]
        );
        assert!(matches!(outcome, Outcome::Stop));
        let (notes, outcome) = decide_at(&cron_job(json!({"schedule": "61 * * * *"})), &none, now);
        assert_eq!(
            notes,
            vec![warning(
                "UnparseableSchedule",
                "unparseable schedule: \"61 * * * *\" : end of range (61) above maximum (59): 61"
                    .to_owned()
            )]
        );
        assert!(matches!(outcome, Outcome::Stop));
        let (notes, outcome) = decide_at(&cron_job(json!({"schedule": "0 0 30 2 *"})), &none, now);
        assert_eq!(
            notes,
            vec![warning(
                "InvalidSchedule",
                format!("invalid schedule: 0 0 30 2 * : {NEVER_FIRES}")
            )]
        );
        assert!(matches!(outcome, Outcome::Stop));
        let cj = cron_job(json!({"schedule": "CRON_TZ=America/New_York */5 * * * *"}));
        let (notes, outcome) = decide_at(&cj, &none, now);
        assert_eq!(reasons(&notes), ["UnsupportedSchedule"]);
        assert!(started(&outcome).is_some());
    }

    #[test]
    fn too_many_missed_times_warn() {
        let cj = cron_job(json!({"schedule": "* * * * *"}));
        let (notes, outcome) = decide_at(&cj, &CronJobStatus::default(), "2024-05-02T00:00:10Z");
        assert_eq!(reasons(&notes), ["TooManyMissedTimes"]);
        assert_eq!(started(&outcome), Some((ts("2024-05-02T00:00:00Z"), false)));
    }

    #[test]
    fn schedules_are_read_in_the_time_zone() {
        // 02:30 every day in New York: on 2024-03-10 that time does not exist.
        let cj = cron_job(json!({"schedule": "30 2 * * *", "timeZone": "America/New_York"}));
        let status = CronJobStatus {
            last_schedule_time: Some(Time(ts("2024-03-09T07:30:00Z"))),
            ..Default::default()
        };
        let (_, outcome) = decide_at(&cj, &status, "2024-03-10T12:00:00Z");
        assert!(started(&outcome).is_none());
        let (_, outcome) = decide_at(&cj, &status, "2024-03-11T06:30:01Z");
        assert_eq!(started(&outcome), Some((ts("2024-03-11T06:30:00Z"), false)));
        let Outcome::Start {
            annotation_zone, ..
        } = outcome
        else {
            unreachable!()
        };
        let job = job_from_template(&cj, ts("2024-03-11T06:30:00Z"), &annotation_zone);
        assert_eq!(
            job.metadata.annotations.unwrap()[SCHEDULED_TIMESTAMP_ANNOTATION],
            "2024-03-11T02:30:00-04:00"
        );
    }

    #[test]
    fn locations_load_as_go_loads_them() {
        assert_eq!(load_location("UTC").unwrap(), TimeZone::UTC);
        assert_eq!(load_location("").unwrap(), TimeZone::UTC);
        assert_eq!(
            load_location("Mars/Olympus").unwrap_err(),
            "unknown time zone Mars/Olympus"
        );
        for bad in ["../etc/passwd", "/etc/localtime", "America//New_York"] {
            assert_eq!(
                load_location(bad).unwrap_err(),
                format!("unknown time zone {bad}")
            );
        }
        if Path::new(ZONEINFO).join("America/New_York").is_file() {
            let ny = load_location("America/New_York").unwrap();
            assert_eq!(
                format_rfc3339(ts("2024-07-01T12:00:00Z"), &ny),
                "2024-07-01T08:00:00-04:00"
            );
        }
    }
}
