//! The `Retry-After` of rejected requests (upstream `dropped_requests_tracker.go`): per
//! priority level, starting at 1 second, doubled (up to 32) when at least three times that
//! many requests were dropped in the last that-many seconds, and lowered by one when fewer
//! than that many were.

use std::collections::HashMap;
use std::sync::Mutex;

/// The largest `Retry-After`, in seconds.
const MAX_RETRY_AFTER: i64 = 32;

struct Stats {
    /// (unix second, drops) of past seconds, oldest first.
    history: Vec<(i64, i64)>,
    current_second: i64,
    current_count: i64,
    retry_after: i64,
    last_raise: i64,
}

impl Default for Stats {
    fn default() -> Stats {
        Stats {
            history: Vec::new(),
            current_second: 0,
            current_count: 0,
            retry_after: 1,
            last_raise: 0,
        }
    }
}

impl Stats {
    fn record(&mut self, now: i64) {
        if self.current_second == now {
            self.current_count += 1;
            return;
        }
        self.history.push((self.current_second, self.current_count));
        let horizon = self.current_second - MAX_RETRY_AFTER;
        self.history.retain(|(second, _)| *second >= horizon);
        self.current_second = now;
        self.current_count = 1;
        self.update(now);
    }

    /// Reconsiders the value from the drops of `[now - retry_after, now)`.
    fn update(&mut self, now: i64) {
        let window = self.retry_after;
        let dropped: i64 = self
            .history
            .iter()
            .filter(|(second, _)| now - second <= window && *second < now)
            .map(|(_, count)| count)
            .sum();
        if now - self.last_raise >= window && dropped >= 3 * window {
            self.retry_after = (window * 2).min(MAX_RETRY_AFTER);
            self.last_raise = now;
        } else if dropped < window && window > 1 {
            self.retry_after = window - 1;
        }
    }
}

/// Dropped requests by priority level.
#[derive(Default)]
pub struct DroppedRequests {
    levels: Mutex<HashMap<String, Stats>>,
}

impl DroppedRequests {
    /// Notes a request of `level` rejected at unix second `now`.
    pub fn record(&self, level: &str, now: i64) {
        let mut levels = self.levels.lock().unwrap_or_else(|p| p.into_inner());
        levels.entry(level.to_owned()).or_default().record(now);
    }

    /// The `Retry-After` seconds for `level` (1 when it dropped nothing yet).
    pub fn retry_after(&self, level: &str) -> i64 {
        let levels = self.levels.lock().unwrap_or_else(|p| p.into_inner());
        levels.get(level).map_or(1, |s| s.retry_after)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_under_sustained_drops_and_shrinks_after() {
        let tracker = DroppedRequests::default();
        assert_eq!(tracker.retry_after("l"), 1);
        let mut now = 1_000;
        for _ in 0..10 {
            tracker.record("l", now);
        }
        now += 1;
        tracker.record("l", now);
        assert_eq!(tracker.retry_after("l"), 2, "10 drops >= 3 x 1");
        for _ in 0..20 {
            tracker.record("l", now);
        }
        now += 2;
        tracker.record("l", now);
        assert_eq!(tracker.retry_after("l"), 4);
        assert_eq!(tracker.retry_after("other"), 1);
        // Quiet seconds bring it down one at a time.
        now += 10;
        tracker.record("l", now);
        now += 10;
        tracker.record("l", now);
        assert_eq!(tracker.retry_after("l"), 2);
    }
}
