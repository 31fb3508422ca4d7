//! The outbox's live figures for the `metrics` feature: what this process's worker pools
//! recorded, and how long its enqueues took. Every clone of an [`Outbox`](super::Outbox), and
//! every pool built from one, counts into the same meter; `metrics.rs` reads it at scrape
//! time, beside the store's own figures (jobs by state, the oldest due job).
//!
//! Counting costs a few relaxed atomic additions per recorded job and per enqueue call.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hodoflow_retry::metrics::Histogram;

use super::job::JobState;

/// Bounds of the enqueue histogram, in seconds: a statement on a local file takes well under a
/// millisecond, a batch of 10,000 into PostgreSQL a tenth of a second or more.
const ENQUEUE_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

/// Bounds of the delivery latency histogram, in seconds, from enqueue to a final state: from a
/// delivery at once to one rescheduled for days on the long schedule (the horizon is 7 days).
const LATENCY_BUCKETS: &[f64] = &[
    0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0, 21600.0,
    86400.0, 604800.0,
];

/// How a job was enqueued: one call of [`Outbox::enqueue`](super::Outbox::enqueue), or of
/// [`Outbox::enqueue_many`](super::Outbox::enqueue_many).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Enqueue {
    One = 0,
    Many = 1,
}

impl Enqueue {
    pub(crate) const ALL: [Enqueue; 2] = [Enqueue::One, Enqueue::Many];

    /// The label value: the method's name.
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Self::One => "enqueue",
            Self::Many => "enqueue_many",
        }
    }
}

/// The figures an outbox's pools and enqueues add to.
#[derive(Debug)]
pub(crate) struct OutboxMeter {
    /// Records written, by the state written ([`JobState::ALL`]'s order; pending: rescheduled).
    recorded: [AtomicU64; JobState::ALL.len()],
    /// Records refused: the claim had been lost to another worker.
    claims_lost: AtomicU64,
    /// Jobs stored now by an enqueue (not the repeats of a stored event ID).
    enqueued: AtomicU64,
    enqueue: [Histogram; 2],
    /// From enqueue to a final state, by that state ([`JobState::ALL`]'s order).
    latency: [Histogram; JobState::ALL.len()],
}

impl Default for OutboxMeter {
    fn default() -> Self {
        Self {
            recorded: Default::default(),
            claims_lost: AtomicU64::new(0),
            enqueued: AtomicU64::new(0),
            enqueue: std::array::from_fn(|_| Histogram::new(ENQUEUE_BUCKETS)),
            latency: std::array::from_fn(|_| Histogram::new(LATENCY_BUCKETS)),
        }
    }
}

/// Where `state` is in [`JobState::ALL`].
fn index(state: JobState) -> usize {
    JobState::ALL
        .iter()
        .position(|known| *known == state)
        .unwrap_or(0)
}

impl OutboxMeter {
    /// A worker wrote a job's record in `state`; `latency` from its enqueue, when final.
    pub(crate) fn recorded(&self, state: JobState, latency: Option<Duration>) {
        self.recorded[index(state)].fetch_add(1, Ordering::Relaxed);
        if let Some(latency) = latency.filter(|_| state.is_final()) {
            self.latency[index(state)].observe(latency);
        }
    }

    /// A worker's record was refused: its claim had been lost.
    pub(crate) fn claim_lost(&self) {
        self.claims_lost.fetch_add(1, Ordering::Relaxed);
    }

    /// An enqueue call stored `stored` new jobs in `took`.
    pub(crate) fn enqueued(&self, how: Enqueue, stored: usize, took: Duration) {
        self.enqueued.fetch_add(stored as u64, Ordering::Relaxed);
        self.enqueue[how as usize].observe(took);
    }

    /// Records written in `state`.
    pub(crate) fn recorded_in(&self, state: JobState) -> u64 {
        self.recorded[index(state)].load(Ordering::Relaxed)
    }

    /// Records refused for a lost claim.
    pub(crate) fn claims_lost(&self) -> u64 {
        self.claims_lost.load(Ordering::Relaxed)
    }

    /// Jobs stored now by enqueues.
    pub(crate) fn enqueued_jobs(&self) -> u64 {
        self.enqueued.load(Ordering::Relaxed)
    }

    /// The durations of `how`'s calls.
    pub(crate) fn enqueue_durations(&self, how: Enqueue) -> &Histogram {
        &self.enqueue[how as usize]
    }

    /// The latencies, enqueue to `state` (final).
    pub(crate) fn latencies(&self, state: JobState) -> &Histogram {
        &self.latency[index(state)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_latency_is_kept_only_for_a_final_state() {
        let meter = OutboxMeter::default();
        let second = Some(Duration::from_secs(1));
        meter.recorded(JobState::Accepted, second);
        meter.recorded(JobState::Pending, second);
        meter.recorded(JobState::Pending, None);
        assert_eq!(meter.recorded_in(JobState::Accepted), 1);
        assert_eq!(meter.recorded_in(JobState::Pending), 2);
        assert_eq!(meter.latencies(JobState::Accepted).count(), 1);
        assert_eq!(meter.latencies(JobState::Pending).count(), 0);
    }
}
