//! Work queues for controllers (client-go `util/workqueue`): a [`WorkQueue`] hands each
//! key to one worker at a time, folds repeated adds of a waiting key into one, re-queues
//! a key added while a worker holds it once the worker is [`done`](WorkQueue::done), and
//! delays keys ([`add_after`](WorkQueue::add_after)) and failing keys
//! ([`add_rate_limited`](WorkQueue::add_rate_limited)) by a [`RateLimiter`].
//!
//! [`default_controller_rate_limiter`] is client-go's `DefaultControllerRateLimiter`:
//! the larger of a per-key exponential backoff (5 ms doubled per failure, at most
//! 1,000 s) and an overall token bucket (10 per second, bursts of 100).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::flowcontrol::TokenBucket;

/// How long a failing key waits before its next try (client-go
/// `TypedRateLimiter`).
pub trait RateLimiter<T>: Send + Sync {
    /// The wait before `item`'s next try; counts a failure of it.
    fn when(&self, item: &T) -> Duration;
    /// Forgets `item`'s failures (it succeeded, or was deleted).
    fn forget(&self, item: &T);
    /// How many failures of `item` are counted.
    fn num_requeues(&self, item: &T) -> u32;
}

/// Per-key exponential backoff (client-go `ItemExponentialFailureRateLimiter`): `base`
/// doubled per failure counted for the key, at most `max`.
#[derive(Debug)]
pub struct ItemExponentialFailureRateLimiter<T> {
    base: Duration,
    max: Duration,
    failures: Mutex<HashMap<T, u32>>,
}

impl<T> ItemExponentialFailureRateLimiter<T> {
    /// Backoff from `base` up to `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max,
            failures: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<T, u32>> {
        self.failures.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<T: Hash + Eq + Clone + Send> RateLimiter<T> for ItemExponentialFailureRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        let mut failures = self.lock();
        let n = failures.entry(item.clone()).or_insert(0);
        let exp = *n;
        *n = n.saturating_add(1);
        let factor = 2u32.checked_pow(exp).unwrap_or(u32::MAX);
        self.base
            .checked_mul(factor)
            .unwrap_or(self.max)
            .min(self.max)
    }

    fn forget(&self, item: &T) {
        self.lock().remove(item);
    }

    fn num_requeues(&self, item: &T) -> u32 {
        self.lock().get(item).copied().unwrap_or(0)
    }
}

/// An overall token bucket (client-go `BucketRateLimiter`): every retry of any key takes
/// a token; it counts no failures.
#[derive(Debug)]
pub struct BucketRateLimiter {
    bucket: TokenBucket,
}

impl BucketRateLimiter {
    /// A full bucket of `burst` tokens refilled at `qps` per second.
    pub fn new(qps: f64, burst: f64) -> Self {
        Self {
            bucket: TokenBucket::new(qps, burst),
        }
    }
}

impl<T> RateLimiter<T> for BucketRateLimiter {
    fn when(&self, _: &T) -> Duration {
        self.bucket.reserve()
    }

    fn forget(&self, _: &T) {}

    fn num_requeues(&self, _: &T) -> u32 {
        0
    }
}

/// The longest wait of several limiters (client-go `MaxOfRateLimiter`); failures are
/// counted by the largest count any of them keeps.
pub struct MaxOfRateLimiter<T>(Vec<Box<dyn RateLimiter<T>>>);

impl<T> MaxOfRateLimiter<T> {
    /// The limiters to combine.
    pub fn new(limiters: Vec<Box<dyn RateLimiter<T>>>) -> Self {
        Self(limiters)
    }
}

impl<T> RateLimiter<T> for MaxOfRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        self.0
            .iter()
            .map(|l| l.when(item))
            .max()
            .unwrap_or_default()
    }

    fn forget(&self, item: &T) {
        for l in &self.0 {
            l.forget(item);
        }
    }

    fn num_requeues(&self, item: &T) -> u32 {
        self.0
            .iter()
            .map(|l| l.num_requeues(item))
            .max()
            .unwrap_or(0)
    }
}

/// client-go's `DefaultControllerRateLimiter`: per key 5 ms doubling up to 1,000 s,
/// overall 10 retries per second with bursts of 100, whichever waits longer.
pub fn default_controller_rate_limiter<T: Hash + Eq + Clone + Send + 'static>()
-> MaxOfRateLimiter<T> {
    MaxOfRateLimiter::new(vec![
        Box::new(ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(5),
            Duration::from_secs(1000),
        )),
        Box::new(BucketRateLimiter::new(10.0, 100.0)),
    ])
}

/// Where a queue reports its metrics (client-go `workqueue.MetricsProvider`); the
/// component exposes them as `workqueue_adds_total{name}`, `workqueue_depth{name}`,
/// `workqueue_queue_duration_seconds{name}`, `workqueue_work_duration_seconds{name}` and
/// `workqueue_retries_total{name}`. Every method does nothing by default.
pub trait QueueMetrics: Send + Sync {
    /// A queue named `name` was made: its metrics show from now on, at zero (client-go
    /// creates them with the queue).
    fn new_queue(&self, _name: &str) {}
    /// A key was added (not counting adds folded into a waiting one).
    fn add(&self, _name: &str) {}
    /// The number of keys waiting for a worker.
    fn depth(&self, _name: &str, _depth: usize) {}
    /// A key waited this long between its add and a worker taking it.
    fn queue_duration(&self, _name: &str, _waited: Duration) {}
    /// A worker held a key this long.
    fn work_duration(&self, _name: &str, _worked: Duration) {}
    /// A key was re-added by its rate limiter.
    fn retry(&self, _name: &str) {}
}

/// Metrics that go nowhere.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoMetrics;

impl QueueMetrics for NoMetrics {}

struct State<T> {
    /// Keys waiting for a worker, in order.
    queue: VecDeque<T>,
    /// Keys that need processing: those in `queue`, and those held by a worker that
    /// were added again meanwhile. Each with the time it was added.
    dirty: HashMap<T, Instant>,
    /// Keys a worker holds, with the time it took them.
    processing: HashMap<T, Instant>,
    /// Delayed keys by ready time (with a sequence number to keep equal times apart).
    waiting: BTreeMap<(Instant, u64), T>,
    /// The ready time of each delayed key.
    waiting_at: HashMap<T, (Instant, u64)>,
    seq: u64,
    shutting_down: bool,
}

/// A rate-limited, delaying work queue of keys (client-go
/// `TypedRateLimitingInterface`). Thread-safe; share it in an `Arc`.
pub struct WorkQueue<T> {
    name: String,
    state: Mutex<State<T>>,
    notify: Notify,
    limiter: Box<dyn RateLimiter<T>>,
    metrics: Arc<dyn QueueMetrics>,
}

impl<T> std::fmt::Debug for WorkQueue<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkQueue")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl<T: Hash + Eq + Clone + Send + 'static> WorkQueue<T> {
    /// A queue named `name` (the `name` label of its metrics) with client-go's default
    /// controller rate limiter and no metrics.
    pub fn new(name: &str) -> Self {
        Self::with_limiter(name, Box::new(default_controller_rate_limiter()))
    }

    /// A queue named `name` whose failing keys wait as `limiter` says.
    pub fn with_limiter(name: &str, limiter: Box<dyn RateLimiter<T>>) -> Self {
        Self {
            name: name.to_owned(),
            state: Mutex::new(State {
                queue: VecDeque::new(),
                dirty: HashMap::new(),
                processing: HashMap::new(),
                waiting: BTreeMap::new(),
                waiting_at: HashMap::new(),
                seq: 0,
                shutting_down: false,
            }),
            notify: Notify::new(),
            limiter,
            metrics: Arc::new(NoMetrics),
        }
    }

    /// Reports into `metrics`.
    #[must_use]
    pub fn with_metrics(mut self, metrics: Arc<dyn QueueMetrics>) -> Self {
        metrics.new_queue(&self.name);
        self.metrics = metrics;
        self
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `item` unless it already waits; a key a worker holds is queued again when
    /// the worker is done. Ignored after [`shut_down`](Self::shut_down).
    pub fn add(&self, item: T) {
        let mut state = self.lock();
        if self.add_locked(&mut state, item) {
            drop(state);
            self.notify.notify_one();
        }
    }

    /// True when the key went to the queue (a worker should wake).
    fn add_locked(&self, state: &mut State<T>, item: T) -> bool {
        if state.shutting_down || state.dirty.contains_key(&item) {
            return false;
        }
        self.metrics.add(&self.name);
        state.dirty.insert(item.clone(), Instant::now());
        if state.processing.contains_key(&item) {
            return false;
        }
        state.queue.push_back(item);
        self.metrics.depth(&self.name, state.queue.len());
        true
    }

    /// Queues `item` once `delay` has passed (at once for zero); a key already delayed
    /// keeps the earlier of its two times (client-go `AddAfter`).
    pub fn add_after(&self, item: T, delay: Duration) {
        if delay.is_zero() {
            self.add(item);
            return;
        }
        let at = Instant::now() + delay;
        let mut state = self.lock();
        if state.shutting_down {
            return;
        }
        if let Some(&(old, seq)) = state.waiting_at.get(&item) {
            if old <= at {
                return;
            }
            state.waiting.remove(&(old, seq));
        }
        state.seq += 1;
        let key = (at, state.seq);
        state.waiting.insert(key, item.clone());
        state.waiting_at.insert(item, key);
        drop(state);
        // A sleeping worker recomputes its wake-up time.
        self.notify.notify_one();
    }

    /// Queues `item` after the wait its rate limiter gives it, counting a failure
    /// (client-go `AddRateLimited`).
    pub fn add_rate_limited(&self, item: T) {
        self.metrics.retry(&self.name);
        let delay = self.limiter.when(&item);
        self.add_after(item, delay);
    }

    /// Forgets `item`'s failures: its next rate-limited add waits the least again.
    pub fn forget(&self, item: &T) {
        self.limiter.forget(item);
    }

    /// The failures counted for `item`.
    pub fn num_requeues(&self, item: &T) -> u32 {
        self.limiter.num_requeues(item)
    }

    /// The next key for a worker, waiting for one; None once the queue is shut down and
    /// empty. The worker must call [`done`](Self::done) with it.
    pub async fn get(&self) -> Option<T> {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let next_ready = {
                let mut state = self.lock();
                let now = Instant::now();
                self.promote_ready(&mut state, now);
                if let Some(item) = state.queue.pop_front() {
                    self.metrics.depth(&self.name, state.queue.len());
                    if let Some(added) = state.dirty.remove(&item) {
                        self.metrics
                            .queue_duration(&self.name, now.saturating_duration_since(added));
                    }
                    state.processing.insert(item.clone(), now);
                    let more = !state.queue.is_empty();
                    drop(state);
                    if more {
                        // Another worker may take the next one.
                        self.notify.notify_one();
                    }
                    return Some(item);
                }
                if state.shutting_down {
                    return None;
                }
                state.waiting.keys().next().map(|&(at, _)| at)
            };
            match next_ready {
                Some(at) => {
                    tokio::select! {
                        () = &mut notified => {}
                        () = tokio::time::sleep_until(at) => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    /// Moves the delayed keys whose time has come to the queue.
    fn promote_ready(&self, state: &mut State<T>, now: Instant) {
        while let Some(entry) = state.waiting.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let item = entry.remove();
            state.waiting_at.remove(&item);
            self.add_locked(state, item);
        }
    }

    /// The worker is finished with `item`; queued again if it was added meanwhile.
    pub fn done(&self, item: &T) {
        let mut state = self.lock();
        if let Some(started) = state.processing.remove(item) {
            self.metrics.work_duration(&self.name, started.elapsed());
        }
        if state.dirty.contains_key(item) {
            state.queue.push_back(item.clone());
            self.metrics.depth(&self.name, state.queue.len());
            drop(state);
            self.notify.notify_one();
        }
    }

    /// Stops the queue: adds are ignored, and [`get`](Self::get) returns None once the
    /// keys already queued are taken. Delayed keys are dropped.
    pub fn shut_down(&self) {
        let mut state = self.lock();
        state.shutting_down = true;
        state.waiting.clear();
        state.waiting_at.clear();
        drop(state);
        self.notify.notify_waiters();
    }

    /// The number of keys waiting for a worker (not counting delayed ones).
    pub fn len(&self) -> usize {
        self.lock().queue.len()
    }

    /// True when no key waits for a worker.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_backoff_doubles_to_its_max_and_forgets() {
        let l = ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(1),
            Duration::from_secs(1),
        );
        let waits: Vec<u128> = (0..12).map(|_| l.when(&"a").as_millis()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000, 1000]);
        assert_eq!(l.num_requeues(&"a"), 12);
        assert_eq!(l.when(&"b"), Duration::from_millis(1));
        l.forget(&"a");
        assert_eq!(l.num_requeues(&"a"), 0);
        assert_eq!(l.when(&"a"), Duration::from_millis(1));
        // No overflow after very many failures.
        for _ in 0..100 {
            l.when(&"c");
        }
        assert_eq!(l.when(&"c"), Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn default_limiter_is_the_larger_of_backoff_and_bucket() {
        let l = default_controller_rate_limiter::<u32>();
        // The bucket's burst of 100 covers the first retries: the per-key backoff rules.
        assert_eq!(l.when(&1), Duration::from_millis(5));
        assert_eq!(l.when(&1), Duration::from_millis(10));
        for i in 2..100 {
            assert_eq!(l.when(&i), Duration::from_millis(5));
        }
        // The 101st retry overall waits for a token: 100 ms at 10 per second.
        assert_eq!(l.when(&500), Duration::from_millis(100));
        assert_eq!(l.num_requeues(&1), 2);
    }

    #[tokio::test]
    async fn adds_fold_and_a_held_key_comes_back_after_done() {
        let q = WorkQueue::new("test");
        q.add("a");
        q.add("b");
        q.add("a");
        assert_eq!(q.len(), 2);
        assert_eq!(q.get().await, Some("a"));
        // Added while held: not handed to another worker, queued again on done.
        q.add("a");
        assert_eq!(q.get().await, Some("b"));
        assert!(q.is_empty());
        q.done(&"b");
        assert!(q.is_empty());
        q.done(&"a");
        assert_eq!(q.len(), 1);
        assert_eq!(q.get().await, Some("a"));
        q.done(&"a");
        assert!(q.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn delayed_keys_wait_and_keep_the_earlier_time() {
        let q = Arc::new(WorkQueue::new("test"));
        let start = Instant::now();
        q.add_after("late", Duration::from_secs(10));
        q.add_after("soon", Duration::from_secs(5));
        q.add_after("late", Duration::from_secs(20));
        q.add_after("late", Duration::from_secs(8));
        assert!(q.is_empty());
        assert_eq!(q.get().await, Some("soon"));
        assert_eq!(start.elapsed(), Duration::from_secs(5));
        assert_eq!(q.get().await, Some("late"));
        assert_eq!(start.elapsed(), Duration::from_secs(8));
        // A waiting worker wakes for a key added meanwhile.
        let q2 = Arc::clone(&q);
        let worker = tokio::spawn(async move { q2.get().await });
        tokio::time::sleep(Duration::from_secs(1)).await;
        q.add_after("x", Duration::from_secs(2));
        assert_eq!(worker.await.unwrap(), Some("x"));
        assert_eq!(start.elapsed(), Duration::from_secs(11));
    }

    #[tokio::test(start_paused = true)]
    async fn rate_limited_adds_back_off_per_key() {
        let q = WorkQueue::with_limiter(
            "test",
            Box::new(ItemExponentialFailureRateLimiter::new(
                Duration::from_secs(1),
                Duration::from_secs(60),
            )),
        );
        let start = Instant::now();
        for expected in [1, 3, 7] {
            q.add_rate_limited("k");
            let k = q.get().await.expect("key");
            assert_eq!(start.elapsed(), Duration::from_secs(expected));
            q.done(&k);
        }
        assert_eq!(q.num_requeues(&"k"), 3);
        q.forget(&"k");
        q.add_rate_limited("k");
        assert_eq!(q.get().await, Some("k"));
        assert_eq!(start.elapsed(), Duration::from_secs(8));
    }

    #[tokio::test]
    async fn shut_down_drains_then_ends_every_worker() {
        let q = Arc::new(WorkQueue::new("test"));
        let workers: Vec<_> = (0..3)
            .map(|_| {
                let q = Arc::clone(&q);
                tokio::spawn(async move {
                    let mut got = Vec::new();
                    while let Some(k) = q.get().await {
                        got.push(k);
                        q.done(&k);
                    }
                    got
                })
            })
            .collect();
        for i in 0..10 {
            q.add(i);
        }
        q.add_after(99, Duration::from_secs(3600));
        while !q.is_empty() {
            tokio::task::yield_now().await;
        }
        q.shut_down();
        q.add(100);
        let mut all = Vec::new();
        for w in workers {
            all.extend(w.await.unwrap());
        }
        all.sort_unstable();
        assert_eq!(all, (0..10).collect::<Vec<_>>());
    }
}
