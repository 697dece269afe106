//! How many seats a request occupies (upstream `util/flowcontrol/request/width.go` and
//! `list_work_estimator.go`, by object count): one, except LIST requests (and watches
//! that ask for initial events), which take one seat per 100 objects they will process,
//! between 1 and the level's maximum (at most 10).
//!
//! Object counts come from the store (keys under the resource's prefix), remembered for
//! [`COUNT_TTL`] as upstream's object count tracker refreshes them once a minute.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::request_info::{Query, RequestInfo};

/// The fewest seats a request takes.
pub const MINIMUM_SEATS: usize = 1;
/// The most seats a LIST takes (`maximumSeats`).
pub const MAXIMUM_SEATS: usize = 10;
/// Objects per seat.
const OBJECTS_PER_SEAT: f64 = 100.0;
/// How long an object count is trusted.
pub const COUNT_TTL: Duration = Duration::from_secs(60);
/// Upstream's `priorityLevelMaxSeatsPercent`.
const MAX_SEATS_SHARE: f64 = 0.15;

/// The most seats a request of a queuing level takes (upstream: `max(1, min(ceil(0.15 ×
/// nominal limit), nominal limit / hand size))`); `None` for other levels.
pub fn level_max_seats(concurrency_limit: usize, hand_size: Option<usize>) -> Option<usize> {
    let hand = hand_size?.max(1);
    let share = (concurrency_limit as f64 * MAX_SEATS_SHARE).ceil() as usize;
    Some(share.min(concurrency_limit / hand).max(1))
}

/// The seats of a request given the object count of its resource (`None`: unknown, which
/// upstream prices at the minimum) and the level's maximum.
pub fn seats(
    info: &RequestInfo,
    query: &Query,
    object_count: Option<i64>,
    level_max: Option<usize>,
) -> usize {
    let max = level_max
        .filter(|m| *m > 0)
        .map_or(MAXIMUM_SEATS, |m| m.min(MAXIMUM_SEATS));
    let listing = match info.verb.as_str() {
        "list" => true,
        "watch" => query.send_initial_events,
        _ => false,
    };
    if !listing {
        return MINIMUM_SEATS;
    }
    let Some(stored) = object_count else {
        return MINIMUM_SEATS;
    };
    let limit = if query.limit > 0 && query.limit < stored {
        query.limit
    } else {
        stored
    };
    // Served from the watch cache: a watch, or a list without a continuation whose limit
    // the cache can honour (upstream `ShouldDelegateListMeta`).
    let from_cache = info.verb == "watch"
        || (query.continue_token.is_empty() && (query.limit <= 0 || query.resource_version == "0"));
    let objects = if !info.name.is_empty() {
        1
    } else if from_cache {
        stored
    } else if !query.field_selector.is_empty() || !query.label_selector.is_empty() {
        stored + limit
    } else {
        2 * limit
    };
    let wanted = (objects as f64 / OBJECTS_PER_SEAT).ceil() as usize;
    wanted.clamp(MINIMUM_SEATS, max.max(MINIMUM_SEATS))
}

/// Object counts by store prefix, each with when it was read.
#[derive(Default)]
pub struct ObjectCounts {
    counts: Mutex<HashMap<String, (i64, Instant)>>,
}

impl ObjectCounts {
    /// The remembered count of `prefix`, unless older than [`COUNT_TTL`].
    pub fn get(&self, prefix: &str) -> Option<i64> {
        let counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        counts
            .get(prefix)
            .filter(|(_, at)| at.elapsed() < COUNT_TTL)
            .map(|(count, _)| *count)
    }

    pub fn set(&self, prefix: &str, count: i64) {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        counts.insert(prefix.to_owned(), (count, Instant::now()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::Method;

    fn request(uri: &str) -> (RequestInfo, Query) {
        let uri: axum::http::Uri = uri.parse().unwrap();
        (
            RequestInfo::parse(&Method::GET, &uri),
            Query::parse(uri.query()),
        )
    }

    #[test]
    fn lists_cost_by_objects() {
        let (info, query) = request("/api/v1/configmaps");
        assert_eq!(seats(&info, &query, Some(0), None), 1);
        assert_eq!(seats(&info, &query, Some(250), None), 3);
        assert_eq!(seats(&info, &query, Some(100_000), None), 10, "capped");
        assert_eq!(
            seats(&info, &query, Some(100_000), Some(4)),
            4,
            "level's max"
        );
        assert_eq!(seats(&info, &query, None, None), 1, "count unknown");
        // A paged list from the store reads twice its limit.
        let (info, query) = request("/api/v1/configmaps?limit=200&continue=abc");
        assert_eq!(seats(&info, &query, Some(1000), None), 4);
        // One named object.
        let (info, query) =
            request("/api/v1/namespaces/a/configmaps?fieldSelector=metadata.name%3Dx");
        assert_eq!(seats(&info, &query, Some(1000), None), 1);
        // Watches cost one seat unless they ask for the initial events.
        let (info, query) = request("/api/v1/configmaps?watch=true");
        assert_eq!(seats(&info, &query, Some(1000), None), 1);
        let (info, query) = request("/api/v1/configmaps?watch=true&sendInitialEvents=true");
        assert_eq!(seats(&info, &query, Some(1000), None), 10);
        let (info, query) = request("/api/v1/namespaces/a/configmaps/x");
        assert_eq!(seats(&info, &query, Some(1000), None), 1, "a GET");
    }

    #[test]
    fn level_maximums() {
        // The defaults: 600 seats give global-default 49 and a maximum of 8.
        assert_eq!(level_max_seats(49, Some(6)), Some(8));
        assert_eq!(level_max_seats(245, Some(6)), Some(37));
        assert_eq!(level_max_seats(3, Some(6)), Some(1));
        assert_eq!(level_max_seats(13, None), None);
    }
}
