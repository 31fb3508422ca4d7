//! The server model: `c` workers, exponential service times, one FIFO queue, optional shedding,
//! and deduplication by delivery ID.
//!
//! # Why this model can fail metastably
//!
//! Bronson et al. (HotOS 2021) call a system *metastable* when a trigger pushes it into a bad
//! state that a sustaining effect keeps it in after the trigger is gone. Huang et al. (OSDI 2022)
//! found retries to be the most common sustaining effect: when the queue's delay exceeds the
//! clients' timeout, every request the server finishes was already given up, its client has
//! sent it again, and the server spends its whole capacity on work nobody waits for. This model
//! has exactly the parts that effect needs and no more:
//!
//! - **The queue is FIFO and unbounded** unless shedding is on, so its delay is its length over
//!   the capacity.
//! - **A request whose client gave up is still served.** The engine (and each peer's driver)
//!   drops an attempt's future at its timeout; the request stays queued, takes a worker for its
//!   full service time, and its answer goes nowhere ([`Count::Wasted`]).
//! - **A duplicate costs a full service time too**: recognising a delivery ID already executed
//!   takes the same worker time (auth, parse, the dedupe lookup) in this model, as the OSDI'22
//!   artifact's resends do.
//!
//! # Time
//!
//! The server runs under tokio's paused clock. Service is computed exactly in virtual time (a
//! worker that finishes at 5.3 ms starts the next queued request at 5.3 ms, or at its arrival if
//! later). One timer for the whole server, set to the next completion, hands the answers out;
//! tokio's timer rounds it up to the millisecond, so an answer comes at most 1 ms after its
//! virtual completion, and at high rates one wake-up serves every completion of that millisecond.
//!
//! # Deduplication
//!
//! The server dedupes by the delivery ID it receives (the `Idempotency-Key` header), as
//! Hodoflow's webhook sender guide says: a delivery ID already executed is answered `202
//! {"status":"duplicate"}` and not executed again. Independently, it checks the event carried in
//! the body: an event executed under a second delivery ID is a [`Count::DuplicateExecution`], the
//! failure fixed identity prevents, so that figure measures the clients and is not 0 by
//! construction.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

use crate::recorder::{Count, Recorder};
use crate::rng::Rng;
use crate::scenario::{Scenario, Shedding, Trigger};

/// The server's answer to one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reply {
    /// `202 {"status":"accepted"}`: executed now.
    Accepted,
    /// `202 {"status":"duplicate"}`: the delivery ID was executed before.
    Duplicate,
    /// `503` with `Retry-After` (seconds): shed above the queue limit.
    Unavailable(u32),
    /// `429` with `Retry-After` (seconds): shed above the rate limit.
    TooMany(u32),
}

/// The virtual clock of a run: seconds since its start.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock(Instant);

impl Clock {
    /// A clock starting now.
    pub(crate) fn start() -> Self {
        Clock(Instant::now())
    }

    /// Seconds since the start.
    pub(crate) fn now(&self) -> f64 {
        self.0.elapsed().as_secs_f64()
    }

    /// The instant `t` seconds after the start, and never earlier than a millisecond from now:
    /// a sleep until it always sleeps. (Rounded down to the nanosecond, an instant a hair ahead
    /// would be now, the sleep would end at once, and under paused time a task that never
    /// sleeps stops the clock: the run would spin at one instant.)
    pub(crate) fn wake_at(&self, t: f64) -> Instant {
        let at = self.0 + Duration::from_secs_f64(t.max(0.0));
        at.max(Instant::now() + Duration::from_millis(1))
    }
}

struct Job {
    arrived: f64,
    key: u64,
    event: u64,
    reply: oneshot::Sender<Reply>,
}

struct State {
    queue: VecDeque<Job>,
    /// Busy workers by virtual completion time (ns since start).
    busy: BinaryHeap<Reverse<(u64, usize)>>,
    working: Vec<Option<Job>>,
    idle: Vec<usize>,
    executed_keys: Bits,
    executed_events: Bits,
    rng: Rng,
    trigger: Trigger,
    mean_service: f64,
    shedding: Shedding,
    bucket: f64,
    bucket_at: f64,
    /// When the server's loop will next look (ns), so that a job that finishes earlier wakes it.
    wake_at: u64,
}

/// A set of `u64`s below a few million, one bit each.
#[derive(Default)]
struct Bits(Vec<u64>);

impl Bits {
    /// Inserts `n`; whether it was new.
    fn insert(&mut self, n: u64) -> bool {
        let (word, bit) = ((n >> 6) as usize, 1u64 << (n & 63));
        if word >= self.0.len() {
            self.0.resize(word + 1 + word / 2, 0);
        }
        let new = self.0[word] & bit == 0;
        self.0[word] |= bit;
        new
    }
}

/// The server of one run. Cheap to clone: clones share one state.
#[derive(Clone)]
pub(crate) struct Server {
    state: Arc<Mutex<State>>,
    wake: Arc<Notify>,
    recorder: Recorder,
    clock: Clock,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").finish_non_exhaustive()
    }
}

/// A key that names no event: every attempt with it is a new execution.
pub(crate) const UNKNOWN_KEY: u64 = u64::MAX;

impl Server {
    /// The server of `scenario`, recording into `recorder`.
    pub(crate) fn new(scenario: &Scenario, recorder: Recorder, clock: Clock) -> Self {
        let state = State {
            queue: VecDeque::with_capacity(1024),
            busy: BinaryHeap::with_capacity(scenario.workers),
            working: (0..scenario.workers).map(|_| None).collect(),
            idle: (0..scenario.workers).rev().collect(),
            executed_keys: Bits::default(),
            executed_events: Bits::default(),
            rng: Rng::derive(scenario.seed, 0x5e4e_4e00),
            trigger: scenario.trigger,
            mean_service: scenario.mean_service(),
            shedding: scenario.shedding,
            bucket: scenario.shedding.rate_limit.unwrap_or(0.0),
            bucket_at: 0.0,
            wake_at: u64::MAX,
        };
        Server {
            state: Arc::new(Mutex::new(state)),
            wake: Arc::new(Notify::new()),
            recorder,
            clock,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// One attempt of delivery `key` (of event `event`) reaches the server; the answer comes
    /// when it is served or shed. Dropping the future does not take the request back.
    pub(crate) async fn submit(&self, key: u64, event: u64) -> Reply {
        let now = self.clock.now();
        self.recorder.count(Count::Attempt, now);
        let waiting = {
            let mut state = self.lock();
            if let Some(limit) = state.shedding.rate_limit {
                state.bucket = (state.bucket + (now - state.bucket_at) * limit).min(limit);
                state.bucket_at = now;
                if state.bucket < 1.0 {
                    let after = state.shedding.retry_after_secs;
                    drop(state);
                    self.recorder.count(Count::Shed, now);
                    return Reply::TooMany(after);
                }
                state.bucket -= 1.0;
            }
            if let Some(limit) = state.shedding.queue_limit
                && state.queue.len() >= limit
            {
                let after = state.shedding.retry_after_secs;
                drop(state);
                self.recorder.count(Count::Shed, now);
                return Reply::Unavailable(after);
            }
            let (reply, waiting) = oneshot::channel();
            let job = Job {
                arrived: now,
                key,
                event,
                reply,
            };
            match state.idle.pop() {
                Some(worker) => {
                    let done = state.start(worker, job, now);
                    if done < state.wake_at {
                        state.wake_at = done;
                        self.wake.notify_one();
                    }
                }
                None => state.queue.push_back(job),
            }
            waiting
        };
        // The server never drops a job before the run ends.
        waiting.await.unwrap_or(Reply::Unavailable(1))
    }

    /// Serves until `end` seconds: wakes at the next completion (tokio's timer rounds it up to
    /// the millisecond) or when an idle worker takes a job, and hands out the answers of the
    /// requests finished by then.
    pub(crate) async fn run(self, end: f64) {
        loop {
            let now = self.clock.now();
            if now > end {
                break;
            }
            let (len, next) = {
                let mut state = self.lock();
                state.finish_until(now, &self.recorder);
                let next = state
                    .busy
                    .peek()
                    .map_or(u64::MAX, |Reverse((done, _))| *done);
                state.wake_at = next;
                (state.queue.len(), next)
            };
            self.recorder.queue(len, now);
            let next = if next == u64::MAX {
                end + 1.0
            } else {
                next as f64 / 1e9
            };
            let sleep = tokio::time::sleep_until(self.clock.wake_at(next.min(end + 1.0)));
            tokio::select! {
                () = sleep => {}
                () = self.wake.notified() => {}
            }
        }
    }
}

impl State {
    /// Starts `job` on `worker` at `at` seconds; when it will be done (ns).
    fn start(&mut self, worker: usize, job: Job, at: f64) -> u64 {
        let capacity = self.trigger.capacity_at(at);
        let service = self.rng.exp(self.mean_service) / capacity;
        let done = ((at + service) * 1e9) as u64;
        self.working[worker] = Some(job);
        self.busy.push(Reverse((done, worker)));
        done
    }

    fn finish_until(&mut self, now: f64, recorder: &Recorder) {
        let limit = (now * 1e9) as u64;
        while let Some(&Reverse((done, worker))) = self.busy.peek() {
            if done > limit {
                break;
            }
            self.busy.pop();
            let done = done as f64 / 1e9;
            if let Some(job) = self.working[worker].take() {
                self.finish(job, done, recorder);
            }
            match self.queue.pop_front() {
                Some(next) => {
                    let at = next.arrived.max(done);
                    self.start(worker, next, at);
                }
                None => self.idle.push(worker),
            }
        }
    }

    fn finish(&mut self, job: Job, done: f64, recorder: &Recorder) {
        let reply = if job.key != UNKNOWN_KEY && !self.executed_keys.insert(job.key) {
            recorder.count(Count::DuplicateAnswered, done);
            Reply::Duplicate
        } else {
            if !self.executed_events.insert(job.event) {
                recorder.count(Count::DuplicateExecution, done);
            }
            recorder.count(Count::Executed, done);
            Reply::Accepted
        };
        if job.reply.send(reply).is_err() {
            recorder.count(Count::Wasted, done);
        }
    }
}
