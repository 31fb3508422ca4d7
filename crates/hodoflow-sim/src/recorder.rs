//! Counters per second of virtual time, written by the server and the senders as things happen.
//!
//! One second is the resolution of every figure (recovery holds for whole seconds) and keeps the
//! recorder a flat array: counting an event is an index and an add, no allocation.

use std::sync::{Arc, Mutex, MutexGuard};

/// What is counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Count {
    /// An event arrived at its sender.
    Offered,
    /// An attempt reached the server (shed or queued).
    Attempt,
    /// An event ended in success at its sender.
    Goodput,
    /// An attempt was given up by its client before its answer came.
    Timeout,
    /// An event was given up by its sender's policy.
    Lost,
    /// The server shed an attempt (503 or 429).
    Shed,
    /// The server finished a request whose client had already given up (wasted work).
    Wasted,
    /// The server executed a delivery (the first time for its delivery ID).
    Executed,
    /// The server recognised a delivery ID already executed and answered `duplicate`.
    DuplicateAnswered,
    /// The server executed a delivery ID a second time (must stay 0).
    DuplicateExecution,
}

const KINDS: usize = 10;

/// Per-second counters and the queue length at each second's end.
#[derive(Debug, Clone)]
pub(crate) struct Series {
    counts: Vec<[u64; KINDS]>,
    queue: Vec<u64>,
    /// The run has ended: what its teardown drops is not counted.
    closed: bool,
}

impl Series {
    fn new(seconds: usize) -> Self {
        Series {
            counts: vec![[0; KINDS]; seconds + 1],
            queue: vec![0; seconds + 1],
            closed: false,
        }
    }

    /// The number of whole seconds recorded.
    pub(crate) fn seconds(&self) -> usize {
        self.counts.len()
    }

    /// `what` during second `second`.
    pub(crate) fn at(&self, what: Count, second: usize) -> u64 {
        self.counts[second][what as usize]
    }

    /// `what` over seconds `[from, to)`.
    pub(crate) fn sum(&self, what: Count, from: usize, to: usize) -> u64 {
        let to = to.min(self.counts.len());
        let from = from.min(to);
        self.counts[from..to].iter().map(|c| c[what as usize]).sum()
    }

    /// `what` over the whole run.
    pub(crate) fn total(&self, what: Count) -> u64 {
        self.sum(what, 0, self.counts.len())
    }

    /// The largest queue length seen in second `second`.
    pub(crate) fn queue(&self, second: usize) -> u64 {
        self.queue[second]
    }
}

/// The recorder shared by the server and the senders of one run.
#[derive(Debug, Clone)]
pub(crate) struct Recorder(Arc<Mutex<Series>>);

impl Recorder {
    /// A recorder for a run of `seconds`.
    pub(crate) fn new(seconds: usize) -> Self {
        Recorder(Arc::new(Mutex::new(Series::new(seconds))))
    }

    fn lock(&self) -> MutexGuard<'_, Series> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Counts one `what` at `t` seconds.
    pub(crate) fn count(&self, what: Count, t: f64) {
        let mut series = self.lock();
        if series.closed {
            return;
        }
        let second = (t.max(0.0) as usize).min(series.counts.len() - 1);
        series.counts[second][what as usize] += 1;
    }

    /// Notes the queue length `len` at `t` seconds (the second's largest is kept).
    pub(crate) fn queue(&self, len: usize, t: f64) {
        let mut series = self.lock();
        let second = (t.max(0.0) as usize).min(series.queue.len() - 1);
        let slot = &mut series.queue[second];
        *slot = (*slot).max(len as u64);
    }

    /// Ends the run: nothing more is counted.
    pub(crate) fn close(&self) {
        self.lock().closed = true;
    }

    /// What was recorded.
    pub(crate) fn series(&self) -> Series {
        self.lock().clone()
    }
}
