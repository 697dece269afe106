//! Per-item exponential backoff (upstream `k8s.io/client-go/util/flowcontrol.Backoff`),
//! used for CrashLoopBackOff and ImagePullBackOff.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

/// Initial backoff of container restarts and image pulls (10 s).
pub const INITIAL_BACKOFF: Duration = Duration::from_secs(10);
/// Maximum backoff (5 min); an entry untouched for twice this long starts over.
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);

struct Entry {
    backoff: Duration,
    last_update: SystemTime,
}

/// Backoff durations per key: starts at `initial`, doubles on each [`Backoff::next`] up to
/// `max`, and resets when the event comes more than `2 * max` after the last update.
pub struct Backoff {
    initial: Duration,
    max: Duration,
    entries: HashMap<String, Entry>,
}

impl Default for Backoff {
    fn default() -> Self {
        Self::new(INITIAL_BACKOFF, MAX_BACKOFF)
    }
}

impl Backoff {
    /// A backoff from `initial` doubling up to `max`.
    pub fn new(initial: Duration, max: Duration) -> Self {
        Self {
            initial,
            max,
            entries: HashMap::new(),
        }
    }

    /// The current backoff of `key` (zero when unknown).
    pub fn get(&self, key: &str) -> Duration {
        self.entries.get(key).map_or(Duration::ZERO, |e| e.backoff)
    }

    /// True when `key` has an entry.
    pub fn contains(&self, key: &str) -> bool {
        self.entries.contains_key(key)
    }

    /// Records a failure of `key` seen at `event_time`: the first (or first after expiry)
    /// gets `initial`, later ones double up to `max`. `now` becomes the last update.
    pub fn next(&mut self, key: &str, event_time: SystemTime, now: SystemTime) {
        let expired = self
            .entries
            .get(key)
            .is_none_or(|e| self.has_expired(event_time, e.last_update));
        let backoff = if expired {
            self.initial
        } else {
            self.get(key).saturating_mul(2).min(self.max)
        };
        self.entries.insert(
            key.to_owned(),
            Entry {
                backoff,
                last_update: now,
            },
        );
    }

    /// True while `now` is less than the current backoff after `event_time`, unless the
    /// event came more than `2 * max` after the last update (upstream `IsInBackOffSince`).
    pub fn is_in_backoff_since(&self, key: &str, event_time: SystemTime, now: SystemTime) -> bool {
        self.entries.get(key).is_some_and(|e| {
            !self.has_expired(event_time, e.last_update) && elapsed(event_time, now) < e.backoff
        })
    }

    /// True while `now` is less than the current backoff after the last update
    /// (upstream `IsInBackOffSinceUpdate`).
    pub fn is_in_backoff_since_update(&self, key: &str, now: SystemTime) -> bool {
        self.entries.get(key).is_some_and(|e| {
            !self.has_expired(now, e.last_update) && elapsed(e.last_update, now) < e.backoff
        })
    }

    /// Time left until `key` leaves its backoff counted from `event_time`.
    pub fn remaining_since(&self, key: &str, event_time: SystemTime, now: SystemTime) -> Duration {
        self.get(key).saturating_sub(elapsed(event_time, now))
    }

    /// Drops entries not updated for `2 * max`.
    pub fn gc(&mut self, now: SystemTime) {
        let max = self.max;
        self.entries
            .retain(|_, e| elapsed(e.last_update, now) <= max * 2);
    }

    fn has_expired(&self, event_time: SystemTime, last_update: SystemTime) -> bool {
        elapsed(last_update, event_time) > self.max * 2
    }
}

/// `d` as Go's `time.Duration.String()` prints whole seconds and above: `10s`, `1m20s`,
/// `5m0s`, `1h0m0s` (upstream messages embed backoffs this way).
pub fn go_duration(d: Duration) -> String {
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, _) => format!("{m}m{s}s"),
        _ => format!("{h}h{m}m{s}s"),
    }
}

fn elapsed(from: SystemTime, to: SystemTime) -> Duration {
    to.duration_since(from).unwrap_or(Duration::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn doubles_up_to_max_and_resets_after_twice_max() {
        let mut b = Backoff::default();
        let mut seen = Vec::new();
        for i in 0..7 {
            b.next("k", t(i * 10), t(i * 10));
            seen.push(b.get("k").as_secs());
        }
        assert_eq!(seen, vec![10, 20, 40, 80, 160, 300, 300]);
        // An event 10 minutes (2 * max) after the last update starts over.
        b.next("k", t(60 + 601), t(60 + 601));
        assert_eq!(b.get("k").as_secs(), 10);
    }

    #[test]
    fn in_backoff_since_event() {
        let mut b = Backoff::default();
        assert!(!b.is_in_backoff_since("k", t(0), t(1)));
        b.next("k", t(100), t(100));
        assert!(b.is_in_backoff_since("k", t(100), t(109)));
        assert!(!b.is_in_backoff_since("k", t(100), t(110)));
        assert_eq!(
            b.remaining_since("k", t(100), t(104)),
            Duration::from_secs(6)
        );
        assert!(b.is_in_backoff_since_update("k", t(105)));
        assert!(!b.is_in_backoff_since_update("k", t(111)));
        b.gc(t(100 + 601));
        assert!(!b.contains("k"));
    }

    #[test]
    fn ten_minutes_of_running_resets_the_backoff() {
        let mut b = Backoff::default();
        b.next("k", t(0), t(0));
        b.next("k", t(5), t(5));
        assert_eq!(b.get("k").as_secs(), 20);
        // The container restarted at 5 s and ran for more than 10 minutes.
        assert!(!b.is_in_backoff_since("k", t(5 + 601), t(5 + 602)));
        b.next("k", t(5 + 601), t(5 + 602));
        assert_eq!(b.get("k").as_secs(), 10);
    }

    #[test]
    fn go_duration_strings() {
        let s = |secs| go_duration(Duration::from_secs(secs));
        assert_eq!(
            [s(10), s(20), s(80), s(160), s(300), s(3600)],
            ["10s", "20s", "1m20s", "2m40s", "5m0s", "1h0m0s"]
        );
    }
}
