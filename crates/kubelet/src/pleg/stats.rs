//! Relist timings for the metrics endpoint: upstream's histograms
//! `kubelet_pleg_relist_duration_seconds` and `kubelet_pleg_relist_interval_seconds`.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Upper bounds of the histogram buckets in seconds (Prometheus `DefBuckets`, which
/// upstream uses for both PLEG histograms).
pub const BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// A Prometheus histogram in seconds over [`BUCKETS`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Histogram {
    /// Observations at most `BUCKETS[i]` seconds, per bucket (not cumulative); the
    /// `+Inf` bucket is `count`.
    pub bucket_counts: [u64; BUCKETS.len()],
    /// Number of observations.
    pub count: u64,
    /// Sum of the observations in seconds.
    pub sum: f64,
}

impl Histogram {
    fn observe(&mut self, value: Duration) {
        let seconds = value.as_secs_f64();
        if let Some(i) = BUCKETS.iter().position(|bound| seconds <= *bound) {
            self.bucket_counts[i] += 1;
        }
        self.count += 1;
        self.sum += seconds;
    }

    /// `(upper bound, observations at most that bound)` per bucket, cumulative as
    /// Prometheus' `_bucket{le=...}` series (without `+Inf`, which is `count`).
    pub fn cumulative(&self) -> Vec<(f64, u64)> {
        let mut total = 0;
        BUCKETS
            .iter()
            .zip(self.bucket_counts)
            .map(|(bound, n)| {
                total += n;
                (*bound, total)
            })
            .collect()
    }
}

/// A copy of the relist timings.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RelistSnapshot {
    /// Duration of the last successful relist.
    pub last_duration: Option<Duration>,
    /// Time between the starts of the last two relists.
    pub last_interval: Option<Duration>,
    /// Every relist's duration (`kubelet_pleg_relist_duration_seconds`).
    pub duration: Histogram,
    /// Every interval between relists (`kubelet_pleg_relist_interval_seconds`).
    pub interval: Histogram,
}

#[derive(Debug, Default)]
struct State {
    snapshot: RelistSnapshot,
    last_start: Option<Instant>,
}

/// Shared relist timings, written by the PLEG and read by `/metrics`; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct RelistStats(Arc<Mutex<State>>);

impl RelistStats {
    /// The timings so far.
    pub fn snapshot(&self) -> RelistSnapshot {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .snapshot
            .clone()
    }

    /// Records a successful relist that started at `start` and ends now.
    pub(crate) fn record(&self, start: Instant) {
        let mut state = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let duration = start.elapsed();
        state.snapshot.last_duration = Some(duration);
        state.snapshot.duration.observe(duration);
        if let Some(previous) = state.last_start.replace(start) {
            let interval = start.saturating_duration_since(previous);
            state.snapshot.last_interval = Some(interval);
            state.snapshot.interval.observe(interval);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_durations_and_intervals() {
        let stats = RelistStats::default();
        assert_eq!(stats.snapshot(), RelistSnapshot::default());
        let first = Instant::now() - Duration::from_millis(1500);
        stats.record(first);
        let snapshot = stats.snapshot();
        assert!(snapshot.last_duration.unwrap() >= Duration::from_millis(1500));
        assert_eq!(snapshot.last_interval, None);
        assert_eq!(snapshot.duration.count, 1);
        assert_eq!(snapshot.duration.cumulative()[7], (1.0, 0));
        assert_eq!(snapshot.duration.cumulative()[8], (2.5, 1));
        stats.record(first + Duration::from_secs(1));
        let snapshot = stats.snapshot();
        assert_eq!(snapshot.last_interval, Some(Duration::from_secs(1)));
        assert_eq!(snapshot.interval.cumulative()[7], (1.0, 1));
        assert_eq!(snapshot.duration.count, 2);
        assert!(snapshot.duration.sum >= 2.0);
    }
}
