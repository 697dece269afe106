//! The delay before a Job replaces failed pods (upstream `pkg/controller/job/backoff_utils.go`):
//! 10 s after the first failure since the last success, doubling per further failure,
//! at most 10 minutes, counted from the last failure.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

/// The first delay (upstream `DefaultJobPodFailureBackOff`).
pub(crate) const DEFAULT_BACKOFF: Duration = Duration::from_secs(10);
/// The longest delay (upstream `MaxJobPodFailureBackOff`).
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(600);

/// A Job's failures since its last success, and when the last one happened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct BackoffRecord {
    /// Failed pods finished after the last succeeded one.
    pub(crate) failures_after_last_success: u32,
    /// When the last of them finished.
    pub(crate) last_failure: Option<Timestamp>,
}

impl BackoffRecord {
    /// How long pod creation must still wait at `now` (zero when it need not).
    pub(crate) fn remaining(&self, now: Timestamp) -> Duration {
        let (n, Some(last)) = (self.failures_after_last_success, self.last_failure) else {
            return Duration::ZERO;
        };
        if n == 0 {
            return Duration::ZERO;
        }
        let shift = (n - 1).min(16);
        let backoff = DEFAULT_BACKOFF.saturating_mul(1 << shift).min(MAX_BACKOFF);
        let elapsed = now
            .duration_since(last)
            .try_into()
            .unwrap_or(Duration::ZERO);
        backoff.saturating_sub(elapsed)
    }
}

/// When a terminated pod finished: its latest container termination, else its
/// deletion, else `now` (upstream `getFinishedTime`).
pub(crate) fn finish_time(pod: &Pod, now: Timestamp) -> Timestamp {
    let status = pod.status.as_ref();
    let latest = status
        .into_iter()
        .flat_map(|s| {
            s.container_statuses
                .iter()
                .flatten()
                .chain(s.init_container_statuses.iter().flatten())
        })
        .filter_map(|cs| cs.state.as_ref()?.terminated.as_ref()?.finished_at.as_ref())
        .map(|t| t.0)
        .max();
    latest
        .or_else(|| pod.metadata.deletion_timestamp.as_ref().map(|t| t.0))
        .unwrap_or(now)
}

/// Every Job's record, by key (upstream `backoffStore`).
#[derive(Debug, Default)]
pub(crate) struct BackoffStore {
    records: Mutex<HashMap<String, BackoffRecord>>,
}

impl BackoffStore {
    /// The record the newly finished pods make of `key`'s stored one (upstream
    /// `newBackoffRecord`); not stored until [`Self::update`].
    pub(crate) fn new_record(
        &self,
        key: &str,
        succeeded: &[&Pod],
        failed: &[&Pod],
        now: Timestamp,
    ) -> BackoffRecord {
        let old = self
            .records
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
            .copied()
            .unwrap_or_default();
        if succeeded.is_empty() && failed.is_empty() {
            return old;
        }
        let failed_times: Vec<Timestamp> = failed.iter().map(|p| finish_time(p, now)).collect();
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        match succeeded.iter().map(|p| finish_time(p, now)).max() {
            None => BackoffRecord {
                failures_after_last_success: old
                    .failures_after_last_success
                    .saturating_add(count(failed_times.len())),
                last_failure: failed_times.iter().copied().chain(old.last_failure).max(),
            },
            Some(last_success) => {
                let after: Vec<Timestamp> = failed_times
                    .into_iter()
                    .filter(|t| *t > last_success)
                    .collect();
                BackoffRecord {
                    failures_after_last_success: count(after.len()),
                    last_failure: after.into_iter().max(),
                }
            }
        }
    }

    /// Stores `record` for `key`, once the counts it reflects are in the Job's status.
    pub(crate) fn update(&self, key: &str, record: BackoffRecord) {
        self.records
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.to_owned(), record);
    }

    /// Forgets `key` (a finished or deleted Job).
    pub(crate) fn remove(&self, key: &str) {
        self.records
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(key);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod_finished_at(t: &str) -> Pod {
        serde_json::from_value(json!({"status": {"containerStatuses": [
            {"name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
             "state": {"terminated": {"exitCode": 1, "finishedAt": t}}}]}}))
        .expect("a pod")
    }

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("a timestamp")
    }

    #[test]
    fn delay_doubles_from_ten_seconds_and_counts_from_the_last_failure() {
        let store = BackoffStore::default();
        let now = ts("2026-01-01T00:00:05Z");
        let a = pod_finished_at("2026-01-01T00:00:00Z");
        let r = store.new_record("ns/j", &[], &[&a], now);
        assert_eq!(r.failures_after_last_success, 1);
        assert_eq!(r.remaining(now), Duration::from_secs(5));
        store.update("ns/j", r);
        let b = pod_finished_at("2026-01-01T00:00:04Z");
        let r = store.new_record("ns/j", &[], &[&b], now);
        assert_eq!(r.failures_after_last_success, 2);
        assert_eq!(r.remaining(now), Duration::from_secs(19));
        assert_eq!(r.remaining(ts("2026-01-01T01:00:00Z")), Duration::ZERO);
        let many = BackoffRecord {
            failures_after_last_success: 40,
            last_failure: Some(now),
        };
        assert_eq!(many.remaining(now), MAX_BACKOFF);
    }

    #[test]
    fn a_success_resets_the_count() {
        let store = BackoffStore::default();
        let now = ts("2026-01-01T00:01:00Z");
        store.update(
            "ns/j",
            BackoffRecord {
                failures_after_last_success: 3,
                last_failure: Some(ts("2026-01-01T00:00:00Z")),
            },
        );
        let ok = pod_finished_at("2026-01-01T00:00:30Z");
        let before = pod_finished_at("2026-01-01T00:00:20Z");
        let after = pod_finished_at("2026-01-01T00:00:40Z");
        let r = store.new_record("ns/j", &[&ok], &[&before, &after], now);
        assert_eq!(r.failures_after_last_success, 1);
        assert_eq!(r.last_failure, Some(ts("2026-01-01T00:00:40Z")));
        store.remove("ns/j");
        assert_eq!(
            store.new_record("ns/j", &[], &[], now),
            BackoffRecord::default()
        );
    }
}
