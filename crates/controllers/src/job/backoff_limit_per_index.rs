//! `spec.backoffLimitPerIndex` and `spec.maxFailedIndexes` of Indexed Jobs (KEP-3850, GA in
//! 1.33; upstream `pkg/controller/job/indexed_job_utils.go` and `backoff_utils.go`): each
//! index may fail that many times before it is marked failed in `status.failedIndexes`
//! and not run again, while the other indexes go on.
//!
//! - **Counting.** A pod of the Job carries the failures of its index so far in the
//!   annotation `batch.kubernetes.io/job-index-failure-count`, and the failures an
//!   `Ignore` rule of the pod failure policy forgave in
//!   `batch.kubernetes.io/job-index-ignored-failure-count`; a replacement pod gets the
//!   failed pod's counts plus its failure. A failed pod whose count already reaches the
//!   limit fails its index, and so does a pod matching a `FailIndex` rule.
//! - **Delayed deletion.** The last failed pod of an index that waits for its
//!   replacement keeps its tracking finalizer, so that the counts survive until the
//!   replacement carries them (upstream `getPodsWithDelayedDeletionPerIndex`).
//! - **Backoff.** Each index waits on its own: 10 s after its first failure, doubling per
//!   failure (ignored ones included), at most 10 minutes. The Job-wide backoff and
//!   `backoffLimit` (defaulted to 2147483647 with `backoffLimitPerIndex`) do not hold
//!   the indexes back.
//! - **The Job fails** with reason `MaxFailedIndexesExceeded` once more indexes failed
//!   than `maxFailedIndexes`, or with reason `FailedIndexes` once every index finished
//!   and some failed.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::jiff::Timestamp;

use super::backoff::{BackoffRecord, finish_time};
use super::indexed::{OrderedIntervals, completion_index};
use super::pod_failure_policy::{self, FAIL_INDEX};
use super::{has_tracking_finalizer, is_pod_failed, uid};

/// The annotation with the failures of the pod's index before it (upstream
/// `JobIndexFailureCountAnnotation`).
pub(crate) const INDEX_FAILURE_COUNT_KEY: &str = "batch.kubernetes.io/job-index-failure-count";
/// The annotation with the failures of the pod's index that an `Ignore` rule forgave
/// (upstream `JobIndexIgnoredFailureCountAnnotation`).
pub(crate) const INDEX_IGNORED_FAILURE_COUNT_KEY: &str =
    "batch.kubernetes.io/job-index-ignored-failure-count";

/// The reason of a Job with more failed indexes than `maxFailedIndexes` (upstream
/// `JobReasonMaxFailedIndexesExceeded`), and its message.
pub(crate) const MAX_FAILED_INDEXES_EXCEEDED: (&str, &str) = (
    "MaxFailedIndexesExceeded",
    "Job has exceeded the specified maximal number of failed indexes",
);
/// The reason of a Job whose indexes all finished, some failed (upstream
/// `JobReasonFailedIndexes`), and its message.
pub(crate) const FAILED_INDEXES: (&str, &str) = ("FailedIndexes", "Job has failed indexes");

/// A count annotation of `pod`: 0 when absent, not a number, negative or above the
/// int32 range (upstream `parseInt32`, which logs such values and reads them as 0).
fn count_annotation(pod: &Pod, key: &str) -> u32 {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .and_then(|v| v.parse::<i32>().ok())
        .and_then(|v| u32::try_from(v).ok())
        .unwrap_or(0)
}

/// The counted failures of the pod's index before it (upstream `getIndexFailureCount`).
pub(crate) fn index_failure_count(pod: &Pod) -> u32 {
    count_annotation(pod, INDEX_FAILURE_COUNT_KEY)
}

/// The ignored failures of the pod's index before it (upstream
/// `parseIndexFailureIgnoreCountAnnotation`).
pub(crate) fn index_ignored_failure_count(pod: &Pod) -> u32 {
    count_annotation(pod, INDEX_IGNORED_FAILURE_COUNT_KEY)
}

/// All failures of the pod's index before it, ignored ones included (upstream
/// `getIndexAbsoluteFailureCount`).
pub(crate) fn index_absolute_failure_count(pod: &Pod) -> u32 {
    index_failure_count(pod).saturating_add(index_ignored_failure_count(pod))
}

/// Whether the failure of `pod` fails its index (upstream `isIndexFailed`): it failed and
/// matched a `FailIndex` rule, or it failed, counts (no `Ignore` rule matched) and its
/// index had already failed `limit` times.
pub(crate) fn is_index_failed(job: &Job, pod: &Pod, limit: u32) -> bool {
    if !is_pod_failed(pod, job) {
        return false;
    }
    let counted = match job
        .spec
        .as_ref()
        .and_then(|s| s.pod_failure_policy.as_ref())
    {
        Some(policy) => {
            let verdict = pod_failure_policy::match_policy(policy, pod);
            if verdict.action.as_deref() == Some(FAIL_INDEX) {
                return true;
            }
            verdict.count_failed
        }
        None => true,
    };
    counted && index_failure_count(pod) >= limit
}

/// Whether `pod` is one the Job still accounts for: it carries the tracking finalizer,
/// no removal of it is pending, and its index is below `completions` (upstream
/// `getValidPodsWithFilter` without an uncounted set).
fn is_tracked(pod: &Pod, completions: usize, removing: &HashSet<String>) -> Option<usize> {
    let ix = completion_index(pod).filter(|ix| *ix < completions)?;
    (has_tracking_finalizer(pod) && !removing.contains(&uid(pod))).then_some(ix)
}

/// The failed indexes (upstream `calculateFailedIndexes`): those of
/// `status.failedIndexes`, and those a failed pod not counted yet fails now.
///
/// Not counted yet means carrying the tracking finalizer with no removal of it pending
/// (`removing`, the finalizer expectations): upstream reads the finalizer alone, so a
/// pod the Job deleted when it failed, seen again before its finalizer's removal shows,
/// would fail its index too (with `backoffLimitPerIndex: 0`, every index that was
/// running).
///
/// For the same reason, a pod being deleted fails no index, whatever its phase, when the
/// Job is ending: `finished` (a condition it holds or reached in this sync), or failed by
/// [`job_failure`] on the other pods alone. Its own ending deleted the pod. Only a Job
/// that goes on counts a deleted pod's index as failed, as upstream counts a deleted pod
/// as failed (`isPodFailed`). Without this, pods the Job deleted on failing, seen in
/// phase `Failed` before their finalizer's removal, failed their indexes too (CI:
/// `failedIndexes` `0-2` for `0`).
pub(crate) fn failed_indexes(
    job: &Job,
    completions: usize,
    pods: &[Arc<Pod>],
    limit: u32,
    removing: &HashSet<String>,
    finished: bool,
    succeeded: &OrderedIntervals,
) -> OrderedIntervals {
    let prev = job
        .status
        .as_ref()
        .and_then(|s| s.failed_indexes.as_deref())
        .map(|s| OrderedIntervals::parse(s, completions))
        .unwrap_or_default();
    let (deleted, others): (Vec<_>, Vec<_>) = pods
        .iter()
        .filter_map(|p| {
            let ix = is_tracked(p, completions, removing)?;
            is_index_failed(job, p, limit).then_some((ix, p.metadata.deletion_timestamp.is_some()))
        })
        .partition(|&(_, deleted)| deleted);
    let failed = prev.with(others.into_iter().map(|(ix, _)| ix));
    let fails = job
        .spec
        .as_ref()
        .is_some_and(|spec| job_failure(spec, &failed, succeeded, completions).is_some());
    if finished || fails {
        failed
    } else {
        failed.with(deleted.into_iter().map(|(ix, _)| ix))
    }
}

/// The Job's failure for its failed indexes, as (reason, message), if any: more than
/// `maxFailedIndexes` failed, or every index finished and some failed (upstream
/// `syncJob`).
pub(crate) fn job_failure(
    spec: &JobSpec,
    failed: &OrderedIntervals,
    succeeded: &OrderedIntervals,
    completions: usize,
) -> Option<(&'static str, &'static str)> {
    let max = spec
        .max_failed_indexes
        .map(|m| usize::try_from(m).unwrap_or(0));
    if max.is_some_and(|m| failed.total() > m) {
        Some(MAX_FAILED_INDEXES_EXCEEDED)
    } else if failed.total() > 0 && failed.total() + succeeded.total() >= completions {
        Some(FAILED_INDEXES)
    } else {
        None
    }
}

/// For each index that is not `finished` (succeeded or failed) and runs no pod: its
/// failed pod whose finalizer stays until a replacement is created, the one with the
/// most failures and, among those, the latest to finish (upstream
/// `getPodsWithDelayedDeletionPerIndex`). `removing` holds the UIDs whose finalizer
/// removal is pending.
pub(crate) fn pods_with_delayed_deletion(
    job: &Job,
    pods: &[Arc<Pod>],
    active: &[Arc<Pod>],
    finished: &OrderedIntervals,
    removing: &HashSet<String>,
    completions: usize,
    now: Timestamp,
) -> HashMap<usize, Arc<Pod>> {
    let running: HashSet<usize> = active.iter().filter_map(|p| completion_index(p)).collect();
    let mut delayed: HashMap<usize, Arc<Pod>> = HashMap::new();
    for pod in pods {
        let Some(ix) = is_tracked(pod, completions, removing) else {
            continue;
        };
        if !is_pod_failed(pod, job) || finished.has(ix) || running.contains(&ix) {
            continue;
        }
        let later = delayed.get(&ix).is_none_or(|last| {
            index_absolute_failure_count(last) <= index_absolute_failure_count(pod)
                && finish_time(pod, now) >= finish_time(last, now)
        });
        if later {
            delayed.insert(ix, Arc::clone(pod));
        }
    }
    delayed
}

/// The failure counts of the pod replacing `replaced` (both 0 for an index's first pod):
/// the failed pod's counts plus its own failure, counted or ignored as the pod failure
/// policy says (upstream `getNewIndexFailureCounts`).
pub(crate) fn new_index_failure_counts(job: &Job, replaced: Option<&Pod>) -> (u32, u32) {
    let Some(pod) = replaced else {
        return (0, 0);
    };
    let (counted, ignored) = (index_failure_count(pod), index_ignored_failure_count(pod));
    let counts = job
        .spec
        .as_ref()
        .and_then(|s| s.pod_failure_policy.as_ref())
        .is_none_or(|policy| pod_failure_policy::match_policy(policy, pod).count_failed);
    if counts {
        (counted.saturating_add(1), ignored)
    } else {
        (counted, ignored.saturating_add(1))
    }
}

/// Writes the failure count annotations of the pod replacing `replaced` into its
/// template; the ignored count only when not zero (upstream
/// `addIndexFailureCountAnnotation`).
pub(crate) fn add_index_failure_count_annotation(
    template: &mut PodTemplateSpec,
    job: &Job,
    replaced: Option<&Pod>,
) {
    let (counted, ignored) = new_index_failure_counts(job, replaced);
    let annotations = template
        .metadata
        .get_or_insert_with(Default::default)
        .annotations
        .get_or_insert_with(Default::default);
    annotations.insert(INDEX_FAILURE_COUNT_KEY.to_owned(), counted.to_string());
    if ignored > 0 {
        annotations.insert(
            INDEX_IGNORED_FAILURE_COUNT_KEY.to_owned(),
            ignored.to_string(),
        );
    }
}

/// How long the index whose last failed pod is `last_failed` must still wait for its
/// next pod at `now` (upstream `getRemainingTimePerIndex`): the Job backoff's delay for
/// the index's failures, ignored ones included, from that pod's finish.
pub(crate) fn remaining_time_per_index(last_failed: Option<&Pod>, now: Timestamp) -> Duration {
    let Some(pod) = last_failed else {
        return Duration::ZERO;
    };
    BackoffRecord {
        failures_after_last_success: index_absolute_failure_count(pod).saturating_add(1),
        last_failure: Some(finish_time(pod, now)),
    }
    .remaining(now)
}

/// Of the pending `indexes`, those whose backoff has passed; when none has, the
/// shortest wait among them (upstream `getPodCreationInfoForIndependentIndexes`).
pub(crate) fn indexes_to_create_now(
    indexes: Vec<usize>,
    delayed: &HashMap<usize, Arc<Pod>>,
    now: Timestamp,
) -> (Vec<usize>, Duration) {
    let mut shortest: Option<Duration> = None;
    let mut ready = Vec::new();
    for ix in indexes {
        let wait = remaining_time_per_index(delayed.get(&ix).map(AsRef::as_ref), now);
        if wait.is_zero() {
            ready.push(ix);
        } else {
            shortest = Some(shortest.map_or(wait, |s| s.min(wait)));
        }
    }
    if ready.is_empty() {
        (ready, shortest.unwrap_or(Duration::ZERO))
    } else {
        (ready, Duration::ZERO)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::job::JOB_TRACKING_FINALIZER;

    const IX: &str = "batch.kubernetes.io/job-completion-index";

    fn job(spec: serde_json::Value, status: serde_json::Value) -> Job {
        let mut base = json!({"completionMode": "Indexed", "completions": 4,
            "backoffLimitPerIndex": 1, "template": {}});
        if let (Some(b), Some(s)) = (base.as_object_mut(), spec.as_object()) {
            b.extend(s.clone());
        }
        serde_json::from_value(json!({
            "metadata": {"name": "j", "namespace": "ns", "uid": "u"},
            "spec": base, "status": status,
        }))
        .expect("a Job")
    }

    /// A pod of index `ix` in `phase`, with the count annotations (counted, ignored) and
    /// the exit code of its one container, which finished at midnight.
    fn pod(
        name: &str,
        ix: usize,
        phase: &str,
        counts: (&str, Option<&str>),
        exit: i32,
    ) -> Arc<Pod> {
        let mut annotations = json!({IX: ix.to_string(), INDEX_FAILURE_COUNT_KEY: counts.0});
        if let Some(ignored) = counts.1 {
            annotations[INDEX_IGNORED_FAILURE_COUNT_KEY] = json!(ignored);
        }
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "uid": name, "annotations": annotations,
                    "finalizers": [JOB_TRACKING_FINALIZER]},
                "status": {"phase": phase, "containerStatuses": [
                    {"name": "c", "image": "i", "imageID": "", "ready": false,
                     "restartCount": 0, "state": {"terminated": {"exitCode": exit,
                        "finishedAt": "2026-01-01T00:00:00Z"}}}]},
            }))
            .expect("a pod"),
        )
    }

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("a timestamp")
    }

    #[test]
    fn counts_are_read_as_upstream_reads_them() {
        let p = pod("a", 0, "Failed", ("2", Some("3")), 1);
        assert_eq!(
            (index_failure_count(&p), index_ignored_failure_count(&p)),
            (2, 3)
        );
        assert_eq!(index_absolute_failure_count(&p), 5);
        for bad in ["-1", "x", "2147483648", ""] {
            assert_eq!(
                index_failure_count(&pod("b", 0, "Failed", (bad, None), 1)),
                0
            );
        }
    }

    #[test]
    fn replacements_carry_the_counts_plus_the_failure() {
        let plain = job(json!({}), json!({}));
        let failed = pod("a", 1, "Failed", ("1", Some("2")), 1);
        assert_eq!(new_index_failure_counts(&plain, None), (0, 0));
        assert_eq!(new_index_failure_counts(&plain, Some(&*failed)), (2, 2));
        let ignoring = job(
            json!({"podFailurePolicy": {"rules": [{"action": "Ignore",
                "onExitCodes": {"operator": "In", "values": [1]}}]}}),
            json!({}),
        );
        assert_eq!(new_index_failure_counts(&ignoring, Some(&*failed)), (1, 3));
        let mut t = PodTemplateSpec::default();
        add_index_failure_count_annotation(&mut t, &plain, None);
        let a = t.metadata.as_ref().and_then(|m| m.annotations.clone());
        assert_eq!(
            a,
            Some([(INDEX_FAILURE_COUNT_KEY.to_owned(), "0".to_owned())].into())
        );
        add_index_failure_count_annotation(&mut t, &ignoring, Some(&*failed));
        let a = t.metadata.and_then(|m| m.annotations).unwrap_or_default();
        assert_eq!(a[INDEX_FAILURE_COUNT_KEY], "1");
        assert_eq!(a[INDEX_IGNORED_FAILURE_COUNT_KEY], "3");
    }

    #[test]
    fn pods_a_failing_job_deleted_fail_no_index() {
        let deleted = |name: &str, ix: usize| {
            let mut p = (*pod(name, ix, "Failed", ("0", None), 137)).clone();
            p.metadata.deletion_timestamp = Some(
                k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::UNIX_EPOCH),
            );
            Arc::new(p)
        };
        let none = HashSet::new();
        let no_success = OrderedIntervals::default();
        // CI's case: maxFailedIndexes 0 and index 0 failed; the Job deleted the running
        // indexes 1 and 2, which reached Failed before their finalizers went.
        let j = job(
            json!({"backoffLimitPerIndex": 0, "maxFailedIndexes": 0, "completions": 3}),
            json!({"failedIndexes": "0"}),
        );
        let pods = [
            pod("a", 0, "Failed", ("0", None), 1),
            deleted("b", 1),
            deleted("c", 2),
        ];
        let got =
            |finished| failed_indexes(&j, 3, &pods, 0, &none, finished, &no_success).to_string();
        assert_eq!(got(false), "0");
        assert_eq!(got(true), "0");
        // A pod deleted by someone else while the Job goes on fails its index.
        let j = job(
            json!({"backoffLimitPerIndex": 0, "maxFailedIndexes": 1, "completions": 3}),
            json!({}),
        );
        let pods = [deleted("b", 1)];
        let got =
            |finished| failed_indexes(&j, 3, &pods, 0, &none, finished, &no_success).to_string();
        assert_eq!(got(false), "1");
        assert_eq!(got(true), "");
    }

    #[test]
    fn an_index_fails_at_the_limit_or_by_a_fail_index_rule() {
        let j = job(json!({}), json!({"failedIndexes": "3"}));
        let first = pod("a", 0, "Failed", ("0", None), 1);
        let second = pod("b", 1, "Failed", ("1", None), 1);
        let running = pod("c", 2, "Running", ("5", None), 0);
        assert!(!is_index_failed(&j, &first, 1));
        assert!(is_index_failed(&j, &second, 1));
        assert!(!is_index_failed(&j, &running, 1));
        let pods = [first.clone(), second.clone(), running];
        let none = HashSet::new();
        let no_success = OrderedIntervals::default();
        assert_eq!(
            failed_indexes(&j, 4, &pods, 1, &none, false, &no_success).to_string(),
            "1,3"
        );
        // Out of range, or no longer tracked: not counted again.
        assert_eq!(
            failed_indexes(&j, 1, &pods, 1, &none, false, &no_success).to_string(),
            ""
        );
        let removing: HashSet<String> = [uid(&second)].into();
        assert_eq!(
            failed_indexes(&j, 4, &pods, 1, &removing, false, &no_success).to_string(),
            "3"
        );
        // Deleted while running: a failed index, unless the Job is ending (it deleted
        // the pod itself).
        let mut deleted = (*pod("e", 2, "Running", ("1", None), 0)).clone();
        deleted.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::UNIX_EPOCH),
        );
        let pods = [Arc::new(deleted)];
        assert_eq!(
            failed_indexes(&j, 4, &pods, 1, &none, false, &no_success).to_string(),
            "2,3"
        );
        assert_eq!(
            failed_indexes(&j, 4, &pods, 1, &none, true, &no_success).to_string(),
            "3"
        );

        let policy = json!({"podFailurePolicy": {"rules": [
            {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [42]}},
            {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [1]}}]}});
        let j = job(policy, json!({}));
        assert!(is_index_failed(
            &j,
            &pod("d", 0, "Failed", ("0", None), 42),
            5
        ));
        // Ignored failures never fail the index, whatever the count.
        assert!(!is_index_failed(
            &j,
            &pod("e", 0, "Failed", ("9", None), 1),
            1
        ));
        assert!(is_index_failed(
            &j,
            &pod("f", 0, "Failed", ("1", None), 2),
            1
        ));
    }

    #[test]
    fn the_job_fails_past_max_failed_indexes_or_when_all_finished() {
        let spec = |max: Option<i32>| JobSpec {
            max_failed_indexes: max,
            ..Default::default()
        };
        let s = |x: &str| OrderedIntervals::parse(x, 4);
        assert_eq!(job_failure(&spec(Some(1)), &s("0"), &s("1"), 4), None);
        assert_eq!(
            job_failure(&spec(Some(1)), &s("0,2"), &s("1"), 4),
            Some(MAX_FAILED_INDEXES_EXCEEDED)
        );
        assert_eq!(
            job_failure(&spec(Some(1)), &s("0"), &s("1-3"), 4),
            Some(FAILED_INDEXES)
        );
        assert_eq!(job_failure(&spec(None), &s("0-2"), &s(""), 4), None);
        assert_eq!(job_failure(&spec(None), &s(""), &s("0-3"), 4), None);
    }

    #[test]
    fn the_last_failure_of_a_waiting_index_is_kept() {
        let j = job(json!({}), json!({}));
        let now = ts("2026-01-01T00:00:04Z");
        let older = pod("a", 0, "Failed", ("0", None), 1);
        let newer = pod("b", 0, "Failed", ("1", None), 1);
        let of_running = pod("c", 1, "Failed", ("0", None), 1);
        let runs = pod("d", 1, "Running", ("1", None), 0);
        let of_succeeded = pod("e", 2, "Failed", ("0", None), 1);
        let of_failed = pod("f", 3, "Failed", ("0", None), 1);
        let pods = [
            newer.clone(),
            older.clone(),
            of_running,
            runs.clone(),
            of_succeeded,
            of_failed,
        ];
        let s = |x: &str| OrderedIntervals::parse(x, 4);
        let delayed =
            pods_with_delayed_deletion(&j, &pods, &[runs], &s("2,3"), &HashSet::new(), 4, now);
        assert_eq!(delayed.len(), 1, "{delayed:?}");
        assert_eq!(uid(&delayed[&0]), "b");
        let removing: HashSet<String> = ["b".to_owned()].into();
        let delayed = pods_with_delayed_deletion(&j, &pods, &[], &s("2,3"), &removing, 4, now);
        assert_eq!(uid(&delayed[&0]), "a");
        assert!(delayed.contains_key(&1));

        // The index waits 10 s after its first failure, 20 s after its second.
        assert_eq!(
            remaining_time_per_index(Some(&*older), now),
            Duration::from_secs(6)
        );
        assert_eq!(
            remaining_time_per_index(Some(&*newer), now),
            Duration::from_secs(16)
        );
        assert_eq!(remaining_time_per_index(None, now), Duration::ZERO);
        let map: HashMap<usize, Arc<Pod>> = [(0, older), (1, newer)].into();
        assert_eq!(
            indexes_to_create_now(vec![0, 1, 2], &map, now),
            (vec![2], Duration::ZERO)
        );
        assert_eq!(
            indexes_to_create_now(vec![0, 1], &map, now),
            (vec![], Duration::from_secs(6))
        );
    }
}
