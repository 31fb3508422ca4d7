//! The schedule across calls, and the deduplication horizon.
//!
//! A call ([`RetryingClient`](hodoflow_retry::RetryingClient)) retries within its own budget, seconds
//! long. When it ends retryable (the budget ran out on lost answers, 5xx, a `Retry-After` longer
//! than the budget, a refusal of the retry budget), the outbox reschedules the job on a long
//! schedule: [`LongSchedule::DEFAULT_WAITS`], 5 s, 30 s, 2 min, 10 min, 30 min, 1 h, 2 h, 4 h,
//! then every 6 h, each with ±20% jitter so that jobs failed together do not come back together.
//! A `Retry-After` longer than the step is honoured as the least wait, and so is the credential's
//! shared pause.
//!
//! Beside its peers: Svix retries immediately, then after 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and
//! 10 h (about 27 hours in all), then marks the message failed. Hook0 retries in two phases, 30
//! fast retries from 5 s growing to 5 min, then 30 slow retries at a fixed interval. This
//! schedule starts like theirs (seconds, then minutes, then hours) but does not end on a count:
//! it ends at the **deduplication horizon**, which neither peer knows.
//!
//! # The horizon
//!
//! The server remembers an identity for a while: an accepted webhook delivery ID for 7 days
//! (Hodoflow's webhook sender guide), a JSON:API key's stored answer for 24 hours (Hodoflow's
//! "Idempotency and retries"), a Modulify key's for 24 hours (Modulify's "Idempotency and
//! retries"). An acceptance happens after the first send, so a send before
//! `first_sent_at + horizon` always meets the server's memory of it, and a send after may run the
//! event a second time. A job is therefore sent only while its whole next call (its budget's
//! `max_elapsed`) ends before the horizon; a job still without a definite answer then stops as
//! [`JobState::NeedsReconciliation`](super::JobState::NeedsReconciliation) and is never sent
//! again by a worker.

use std::time::{Duration, SystemTime};

use rand::Rng;

/// The waits between the calls of a job.
#[derive(Debug, Clone, PartialEq)]
pub struct LongSchedule {
    waits: Vec<Duration>,
    jitter: f64,
}

impl Default for LongSchedule {
    fn default() -> Self {
        Self {
            waits: Self::DEFAULT_WAITS.to_vec(),
            jitter: Self::DEFAULT_JITTER,
        }
    }
}

impl LongSchedule {
    /// The default waits after the 1st, 2nd, ... call that ended retryable; the last repeats.
    pub const DEFAULT_WAITS: [Duration; 9] = [
        Duration::from_secs(5),
        Duration::from_secs(30),
        Duration::from_secs(2 * 60),
        Duration::from_secs(10 * 60),
        Duration::from_secs(30 * 60),
        Duration::from_secs(3600),
        Duration::from_secs(2 * 3600),
        Duration::from_secs(4 * 3600),
        Duration::from_secs(6 * 3600),
    ];

    /// The default jitter: each wait is drawn uniformly from ±20% of its step.
    pub const DEFAULT_JITTER: f64 = 0.2;

    /// A schedule of these waits (the last repeats), with [`DEFAULT_JITTER`](Self::DEFAULT_JITTER).
    /// An empty list is one wait of zero.
    pub fn new(waits: impl Into<Vec<Duration>>) -> Self {
        let mut waits = waits.into();
        if waits.is_empty() {
            waits.push(Duration::ZERO);
        }
        Self {
            waits,
            jitter: Self::DEFAULT_JITTER,
        }
    }

    /// The jitter, as a fraction of each step (clamped to 0..=1).
    ///
    /// Default: [`DEFAULT_JITTER`](Self::DEFAULT_JITTER).
    pub fn jitter(mut self, fraction: f64) -> Self {
        self.jitter = if fraction.is_finite() {
            fraction.clamp(0.0, 1.0)
        } else {
            Self::DEFAULT_JITTER
        };
        self
    }

    /// The step after the `calls`-th call that ended retryable (1-based), before jitter.
    pub fn step(&self, calls: u32) -> Duration {
        let index = (calls.max(1) as usize - 1).min(self.waits.len() - 1);
        self.waits[index]
    }

    /// The wait after the `calls`-th call: the step with jitter, at least `retry_after`.
    pub fn wait<R: Rng + ?Sized>(
        &self,
        calls: u32,
        retry_after: Option<Duration>,
        rng: &mut R,
    ) -> Duration {
        let step = self.step(calls);
        let factor = 1.0 + self.jitter * (rng.random::<f64>() * 2.0 - 1.0);
        let jittered = Duration::try_from_secs_f64(step.as_secs_f64() * factor).unwrap_or(step);
        jittered.max(retry_after.unwrap_or(Duration::ZERO))
    }
}

/// When the job may no longer be sent: `first_sent_at + horizon`; `None` before its first send
/// (the server has not seen the identity, so it has nothing to forget).
pub(crate) fn horizon_end(
    first_sent_at: Option<SystemTime>,
    horizon: Duration,
) -> Option<SystemTime> {
    first_sent_at.map(|sent| sent.checked_add(horizon).unwrap_or(sent))
}

/// Whether a call starting at `at` and lasting at most `call_time` ends before the horizon.
pub(crate) fn may_send(at: SystemTime, call_time: Duration, end: Option<SystemTime>) -> bool {
    match end {
        None => true,
        Some(end) => at.checked_add(call_time).is_some_and(|done| done < end),
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;

    #[test]
    fn waits_seconds_then_minutes_then_hours_and_repeats_the_last() {
        let schedule = LongSchedule::default();
        let steps: Vec<u64> = (1..=11)
            .map(|calls| schedule.step(calls).as_secs())
            .collect();
        assert_eq!(
            steps,
            [
                5, 30, 120, 600, 1800, 3600, 7200, 14_400, 21_600, 21_600, 21_600
            ]
        );
    }

    #[test]
    fn jitter_stays_within_its_fraction_and_spreads_the_waits() {
        let schedule = LongSchedule::default();
        let mut rng = StdRng::seed_from_u64(7);
        let waits: Vec<Duration> = (0..1000)
            .map(|_| schedule.wait(4, None, &mut rng))
            .collect();
        let (low, high) = (Duration::from_secs(480), Duration::from_secs(720));
        assert!(
            waits.iter().all(|wait| (low..=high).contains(wait)),
            "{waits:?}"
        );
        let below = waits
            .iter()
            .filter(|w| **w < Duration::from_secs(600))
            .count();
        assert!(
            (350..650).contains(&below),
            "{below} of 1000 below the step"
        );
    }

    #[test]
    fn retry_after_is_the_least_wait() {
        let schedule = LongSchedule::default();
        let mut rng = StdRng::seed_from_u64(1);
        let hour = Duration::from_secs(3600);
        for calls in 1..5 {
            assert!(schedule.wait(calls, Some(hour), &mut rng) >= hour);
        }
        let none = LongSchedule::new(Vec::new()).jitter(0.0);
        assert_eq!(none.wait(3, None, &mut rng), Duration::ZERO);
    }

    #[test]
    fn a_call_is_sent_only_when_it_ends_before_the_horizon() {
        let sent = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let end = horizon_end(Some(sent), Duration::from_secs(7 * 86_400));
        let minute = Duration::from_secs(60);
        let before = sent + Duration::from_secs(7 * 86_400) - 2 * minute;
        assert!(may_send(before, minute, end));
        assert!(
            !may_send(before + minute, minute, end),
            "it would end at the horizon"
        );
        assert!(!may_send(before + 10 * minute, minute, end));
        assert!(may_send(
            before + 10 * minute,
            minute,
            horizon_end(None, minute)
        ));
    }
}
