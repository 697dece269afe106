//! One priority level's queues and seats (upstream `fairqueuing/queueset/queueset.go`):
//! requests wait in shuffle-sharded queues and are dispatched by fair queuing on virtual
//! time, so that each busy queue gets an equal share of the level's seats.
//!
//! Virtual time `R` (in seat-seconds) advances at `min(seats wanted, limit) / busy queues`
//! per real second. Each queue keeps the virtual time its next request may start
//! (`next_dispatch_r`); a dispatch takes the head request of the queue whose request would
//! finish first (`next_dispatch_r + seats × G`, with `G` = 3 ms the estimated service time)
//! and advances that queue by the request's work; when a request ends, its queue is
//! corrected by the difference between `G` and the real service time.
//!
//! A level without queues (`Reject`) runs a request at once or rejects it. Requests wider
//! than the whole level run only when nothing else runs.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::shuffle::Dealer;

/// Upstream's estimated service time of a request (`G`).
const ESTIMATED_SERVICE_DURATION: Duration = Duration::from_millis(3);

/// The queues of a `Queue` level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueuingConfig {
    pub queues: usize,
    pub hand_size: usize,
    pub queue_length_limit: usize,
}

/// A priority level's request dispatcher.
pub struct QueueSet {
    name: String,
    state: Mutex<State>,
}

struct State {
    /// `None`: no queues (the level rejects what does not fit).
    queuing: Option<QueuingConfig>,
    dealer: Option<Dealer>,
    concurrency_limit: usize,
    /// Never shrinks, so indices stay valid: queues beyond the configured number get no
    /// new requests and drain.
    queues: Vec<Queue>,
    current_r: f64,
    last_real: Instant,
    robin_index: usize,
    enqueues: usize,
    seats_in_use: usize,
    executing: usize,
    waiting: usize,
    next_id: u64,
    /// Real time; a fixed one in tests, so that virtual time does not depend on how
    /// busy the machine is.
    clock: Clock,
}

/// Where a queue set reads the real time.
type Clock = Arc<dyn Fn() -> Instant + Send + Sync>;

#[derive(Default)]
struct Queue {
    waiting: VecDeque<Waiting>,
    next_dispatch_r: f64,
    seats_in_use: usize,
    executing: usize,
}

struct Waiting {
    id: u64,
    seats: usize,
    arrival_r: f64,
    dispatch: oneshot::Sender<Instant>,
}

/// What [`QueueSet::start`] decided.
pub enum Start {
    /// Run now; dropping the permit frees the seats.
    Execute(Permit),
    /// Wait in a queue.
    Queued(Pending),
    /// The queue is full (or, without queues, the seats are taken).
    Reject,
}

/// Seats held by an executing request; released on drop.
pub struct Permit {
    set: Arc<QueueSet>,
    seats: usize,
    queue: Option<usize>,
    started: Instant,
}

/// A request waiting in a queue; dropping it takes it out of the queue.
pub struct Pending {
    set: Arc<QueueSet>,
    id: u64,
    queue: usize,
    seats: usize,
    dispatched: Option<oneshot::Receiver<Instant>>,
}

fn work(seats: usize) -> f64 {
    seats as f64 * ESTIMATED_SERVICE_DURATION.as_secs_f64()
}

impl QueueSet {
    /// A dispatcher with `queuing` (`None`: reject when full) and `concurrency_limit` seats.
    /// Errors: a queuing configuration shuffle sharding cannot deal.
    pub fn new(
        name: &str,
        queuing: Option<QueuingConfig>,
        concurrency_limit: usize,
    ) -> Result<Arc<QueueSet>, String> {
        Self::with_clock(name, queuing, concurrency_limit, Arc::new(Instant::now))
    }

    /// [`QueueSet::new`] reading the real time from `clock`.
    fn with_clock(
        name: &str,
        queuing: Option<QueuingConfig>,
        concurrency_limit: usize,
        clock: Clock,
    ) -> Result<Arc<QueueSet>, String> {
        let set = Arc::new(QueueSet {
            name: name.to_owned(),
            state: Mutex::new(State {
                queuing: None,
                dealer: None,
                concurrency_limit,
                queues: Vec::new(),
                current_r: 0.0,
                last_real: clock(),
                robin_index: 0,
                enqueues: 0,
                seats_in_use: 0,
                executing: 0,
                waiting: 0,
                next_id: 0,
                clock,
            }),
        });
        set.reconfigure(queuing, concurrency_limit)?;
        Ok(set)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let now = (state.clock)();
        state.sync_time(now);
        state
    }

    /// Applies a new configuration, keeping the requests queued and running (upstream
    /// `BeginConfigChange`): added queues appear at once, removed ones drain.
    pub fn reconfigure(
        &self,
        queuing: Option<QueuingConfig>,
        concurrency_limit: usize,
    ) -> Result<(), String> {
        let dealer = queuing
            .map(|q| Dealer::new(q.queues, q.hand_size))
            .transpose()?;
        let mut state = self.lock();
        if let Some(q) = queuing {
            while state.queues.len() < q.queues {
                state.queues.push(Queue::default());
            }
        }
        state.queuing = queuing;
        state.dealer = dealer;
        state.concurrency_limit = concurrency_limit;
        state.dispatch_as_much_as_possible();
        Ok(())
    }

    /// Seats in use, requests executing and requests waiting.
    pub fn usage(&self) -> (usize, usize, usize) {
        let state = self.lock();
        (state.seats_in_use, state.executing, state.waiting)
    }

    /// Admits a request of `seats` seats of the flow with `hash` (upstream `StartRequest`).
    pub fn start(self: &Arc<Self>, seats: usize, hash: u64) -> Start {
        let seats = seats.max(1);
        let mut state = self.lock();
        let (Some(queuing), Some(dealer)) = (state.queuing, state.dealer) else {
            if !state.can_accommodate(seats) {
                return Start::Reject;
            }
            state.executing += 1;
            state.seats_in_use += seats;
            let started = (state.clock)();
            return Start::Execute(Permit {
                set: self.clone(),
                seats,
                queue: None,
                started,
            });
        };
        let index = state.choose_queue(&dealer, hash);
        let over_limit = state.seats_in_use >= state.concurrency_limit;
        if over_limit && state.queues[index].waiting.len() >= queuing.queue_length_limit {
            return Start::Reject;
        }
        let id = state.next_id;
        state.next_id += 1;
        let (tx, rx) = oneshot::channel();
        let current_r = state.current_r;
        let queue = &mut state.queues[index];
        if queue.waiting.is_empty() && queue.executing == 0 {
            queue.next_dispatch_r = current_r;
        }
        queue.waiting.push_back(Waiting {
            id,
            seats,
            arrival_r: current_r,
            dispatch: tx,
        });
        state.waiting += 1;
        state.bound_next_dispatch(index);
        state.dispatch_as_much_as_possible();
        drop(state);
        let mut pending = Pending {
            set: self.clone(),
            id,
            queue: index,
            seats,
            dispatched: Some(rx),
        };
        // Dispatched at once: no wait.
        match pending.dispatched.as_mut().map(|rx| rx.try_recv()) {
            Some(Ok(started)) => {
                pending.dispatched = None;
                Start::Execute(pending.permit(started))
            }
            _ => Start::Queued(pending),
        }
    }

    /// A request's end: its seats freed, its queue's virtual time corrected by the real
    /// service time, and waiting requests dispatched.
    fn finish(&self, seats: usize, queue: Option<usize>, started: Instant) {
        let mut state = self.lock();
        let served = (state.clock)()
            .saturating_duration_since(started)
            .as_secs_f64();
        state.executing = state.executing.saturating_sub(1);
        state.seats_in_use = state.seats_in_use.saturating_sub(seats);
        if let Some(index) = queue
            && let Some(q) = state.queues.get_mut(index)
        {
            q.executing = q.executing.saturating_sub(1);
            q.seats_in_use = q.seats_in_use.saturating_sub(seats);
            q.next_dispatch_r -= seats as f64 * (ESTIMATED_SERVICE_DURATION.as_secs_f64() - served);
            state.bound_next_dispatch(index);
        }
        state.dispatch_as_much_as_possible();
    }
}

impl State {
    /// Advances virtual time to `now`.
    fn sync_time(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.last_real).as_secs_f64();
        self.last_real = now;
        let mut active = 0usize;
        let mut seats_wanted = 0usize;
        for queue in &self.queues {
            seats_wanted +=
                queue.seats_in_use + queue.waiting.iter().map(|w| w.seats).sum::<usize>();
            if !queue.waiting.is_empty() || queue.executing > 0 {
                active += 1;
            }
        }
        if active > 0 {
            let ratio = seats_wanted.min(self.concurrency_limit) as f64 / active as f64;
            self.current_r += ratio * elapsed;
        }
    }

    fn can_accommodate(&self, seats: usize) -> bool {
        if seats > self.concurrency_limit {
            // Wider than the level: only alone.
            return self.executing == 0;
        }
        self.seats_in_use + seats <= self.concurrency_limit
    }

    /// The queue of the flow's hand with the least work waiting, starting the scan at a
    /// rotating offset so ties do not always favour the same card.
    fn choose_queue(&mut self, dealer: &Dealer, hash: u64) -> usize {
        let hand = dealer.deal(hash);
        let offset = self.enqueues % hand.len().max(1);
        self.enqueues = self.enqueues.wrapping_add(1);
        let mut best = hand.first().copied().unwrap_or(0);
        let mut least = f64::MAX;
        for i in 0..hand.len() {
            let index = hand[(offset + i) % hand.len()];
            let waiting: f64 = self.queues[index]
                .waiting
                .iter()
                .map(|w| work(w.seats))
                .sum();
            if waiting < least {
                least = waiting;
                best = index;
            }
        }
        best
    }

    /// Anti-windup: a queue's next dispatch is never before its head request arrived.
    fn bound_next_dispatch(&mut self, index: usize) {
        let queue = &mut self.queues[index];
        if let Some(head) = queue.waiting.front()
            && queue.next_dispatch_r < head.arrival_r
        {
            queue.next_dispatch_r = head.arrival_r;
        }
    }

    fn dispatch_as_much_as_possible(&mut self) {
        while self.waiting > 0 && self.seats_in_use < self.concurrency_limit.max(1) {
            if !self.dispatch_one() {
                break;
            }
        }
    }

    /// Dispatches the head of the queue whose head would finish first in virtual time,
    /// if its seats are free.
    fn dispatch_one(&mut self) -> bool {
        let count = self.queues.len();
        let mut chosen = None;
        let mut least_finish = f64::MAX;
        for _ in 0..count {
            self.robin_index = (self.robin_index + 1) % count;
            let queue = &self.queues[self.robin_index];
            if let Some(head) = queue.waiting.front() {
                let finish = queue.next_dispatch_r + work(head.seats);
                if finish < least_finish {
                    least_finish = finish;
                    chosen = Some(self.robin_index);
                }
            }
        }
        let Some(index) = chosen else {
            return false;
        };
        let seats = self.queues[index].waiting.front().map_or(1, |w| w.seats);
        if !self.can_accommodate(seats) {
            return false;
        }
        let Some(request) = self.queues[index].waiting.pop_front() else {
            return false;
        };
        self.robin_index = index;
        self.waiting -= 1;
        let now = (self.clock)();
        if request.dispatch.send(now).is_err() {
            // The waiter is gone (it takes the lock before leaving, so this is defensive).
            self.bound_next_dispatch(index);
            return true;
        }
        self.executing += 1;
        self.seats_in_use += seats;
        let queue = &mut self.queues[index];
        queue.executing += 1;
        queue.seats_in_use += seats;
        queue.next_dispatch_r += work(seats);
        self.bound_next_dispatch(index);
        true
    }
}

impl Pending {
    fn permit(&self, started: Instant) -> Permit {
        Permit {
            set: self.set.clone(),
            seats: self.seats,
            queue: Some(self.queue),
            started,
        }
    }

    /// Waits until the request is dispatched (`Some`) or `deadline` passes (`None`: it
    /// left its queue).
    pub async fn wait_until(mut self, deadline: tokio::time::Instant) -> Option<Permit> {
        let rx = self.dispatched.as_mut()?;
        if let Ok(Ok(started)) = tokio::time::timeout_at(deadline, rx).await {
            self.dispatched = None;
            return Some(self.permit(started));
        }
        self.leave()
    }

    /// Takes the request out of its queue; if it was dispatched meanwhile, its permit.
    fn leave(&mut self) -> Option<Permit> {
        let mut rx = self.dispatched.take()?;
        {
            let mut state = self.set.lock();
            let queue = &mut state.queues[self.queue];
            if let Some(at) = queue.waiting.iter().position(|w| w.id == self.id) {
                queue.waiting.remove(at);
                state.waiting -= 1;
                state.bound_next_dispatch(self.queue);
                return None;
            }
        }
        rx.try_recv().ok().map(|started| self.permit(started))
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        // A permit obtained here is dropped at once, freeing its seats.
        drop(self.leave());
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.set.finish(self.seats, self.queue, self.started);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queued(queues: usize, hand: usize, limit: usize) -> Option<QueuingConfig> {
        Some(QueuingConfig {
            queues,
            hand_size: hand,
            queue_length_limit: limit,
        })
    }

    fn execute(start: Start) -> Permit {
        match start {
            Start::Execute(permit) => permit,
            Start::Queued(_) => panic!("queued"),
            Start::Reject => panic!("rejected"),
        }
    }

    fn pending(start: Start) -> Pending {
        match start {
            Start::Queued(pending) => pending,
            Start::Execute(_) => panic!("executed"),
            Start::Reject => panic!("rejected"),
        }
    }

    #[test]
    fn reject_levels_run_or_reject_at_once() {
        let set = QueueSet::new("catch-all", None, 2).unwrap();
        let a = execute(set.start(1, 0));
        let _b = execute(set.start(1, 0));
        assert!(matches!(set.start(1, 0), Start::Reject));
        drop(a);
        let _c = execute(set.start(1, 0));
        assert_eq!(set.usage(), (2, 2, 0));
    }

    #[test]
    fn wide_requests_run_alone() {
        let set = QueueSet::new("l", None, 2).unwrap();
        let wide = execute(set.start(5, 0));
        assert!(matches!(set.start(1, 0), Start::Reject));
        drop(wide);
        let narrow = execute(set.start(1, 0));
        assert!(matches!(set.start(5, 0), Start::Reject));
        drop(narrow);
    }

    #[tokio::test]
    async fn queues_fill_then_reject_and_time_out() {
        let set = QueueSet::new("l", queued(1, 1, 2), 1).unwrap();
        let running = execute(set.start(1, 7));
        let first = pending(set.start(1, 7));
        let _second = pending(set.start(1, 7));
        assert!(matches!(set.start(1, 7), Start::Reject), "queue full");
        assert_eq!(set.usage(), (1, 1, 2));
        // A request that waits too long leaves its queue.
        let soon = tokio::time::Instant::now() + Duration::from_millis(20);
        assert!(first.wait_until(soon).await.is_none());
        assert_eq!(set.usage(), (1, 1, 1));
        let _third = pending(set.start(1, 7));
        drop(running);
        assert_eq!(set.usage(), (1, 1, 1), "the oldest waiting request runs");
    }

    #[tokio::test]
    async fn dropped_waiters_leave_their_queue() {
        let set = QueueSet::new("l", queued(4, 1, 10), 1).unwrap();
        let running = execute(set.start(1, 0));
        let waiting = pending(set.start(1, 0));
        assert_eq!(set.usage(), (1, 1, 1));
        drop(waiting);
        assert_eq!(set.usage(), (1, 1, 0));
        drop(running);
        assert_eq!(set.usage(), (0, 0, 0));
    }

    /// A flow with many requests queued does not delay another flow's request by more than
    /// one dispatch: fair queuing alternates between busy queues.
    #[tokio::test]
    async fn fair_queuing_serves_a_quiet_flow_next() {
        let dealer = Dealer::new(8, 1).unwrap();
        let (heavy, light) = (0u64, 1u64);
        assert_ne!(dealer.deal(heavy), dealer.deal(light));
        // Real time stands still: the virtual times depend only on what was queued (a busy
        // machine once stalled this test long enough to put the light flow behind).
        let frozen = Instant::now();
        let set = QueueSet::with_clock("l", queued(8, 1, 50), 1, Arc::new(move || frozen)).unwrap();
        let mut running = execute(set.start(1, heavy));
        let mut heavy_waiting: Vec<Pending> =
            (0..10).map(|_| pending(set.start(1, heavy))).collect();
        let light_waiting = pending(set.start(1, light));
        // The first seat freed goes to one heavy request already ahead in virtual time or
        // to the light one; within two dispatches the light one runs.
        let mut light_rx = light_waiting;
        let mut dispatched_light = false;
        for _ in 0..2 {
            drop(running);
            let soon = tokio::time::Instant::now() + Duration::from_millis(50);
            if let Some(rx) = light_rx.dispatched.as_mut()
                && rx.try_recv().is_ok()
            {
                dispatched_light = true;
                light_rx.dispatched = None;
                running = light_rx.permit(frozen);
                break;
            }
            let next = heavy_waiting.remove(0);
            running = next.wait_until(soon).await.expect("a heavy request runs");
        }
        assert!(
            dispatched_light,
            "the light flow waited behind the heavy one"
        );
        drop(running);
        drop(heavy_waiting);
        assert_eq!(set.usage(), (0, 0, 0));
    }
}
