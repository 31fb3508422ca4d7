//! The retry bucket: AWS standard mode's tokens, a refill over time if asked, and Finagle's
//! floor of retries a second. One per [`RetryBudget`](super::RetryBudget), shared by every
//! service and every client the budget is given to: it bounds how much retrying they do
//! together, whatever fails.

use std::time::Duration;

use tokio::time::Instant;

/// The tokens of the bucket, with the refill due by the time they are read.
#[derive(Debug)]
pub(super) struct Bucket {
    pub(super) tokens: u32,
    /// The instant up to which the refill has been counted.
    refilled_at: Instant,
    pub(super) floor: Floor,
}

impl Bucket {
    /// A full bucket of `capacity`, with a floor of `per_sec` retries a second, at `now`.
    pub(super) fn full(capacity: u32, per_sec: u32, now: Instant) -> Self {
        Self {
            tokens: capacity,
            refilled_at: now,
            floor: Floor {
                retries: f64::from(per_sec),
                at: now,
            },
        }
    }

    /// Adds one token per `every` since the last refill, up to `capacity`. Time spent full is
    /// not banked for later.
    pub(super) fn refill(&mut self, every: Duration, capacity: u32, now: Instant) {
        let elapsed = now.saturating_duration_since(self.refilled_at);
        let due = elapsed.as_nanos() / every.as_nanos();
        let due = u32::try_from(due).unwrap_or(u32::MAX);
        if self.tokens.saturating_add(due) >= capacity {
            self.tokens = capacity;
            self.refilled_at = now;
        } else {
            self.tokens += due;
            // `due` intervals fit in `elapsed`, so this stays at or before `now`.
            let counted = every.saturating_mul(due);
            self.refilled_at = self.refilled_at.checked_add(counted).unwrap_or(now);
        }
    }
}

/// The retries a second that go with the bucket empty: a bucket of its own, refilled
/// continuously, holding one second's worth.
#[derive(Debug)]
pub(super) struct Floor {
    retries: f64,
    at: Instant,
}

impl Floor {
    /// Takes one retry if one is left by `now`, else says how long until one is.
    pub(super) fn take(&mut self, now: Instant, per_sec: u32) -> Result<(), Duration> {
        if per_sec == 0 {
            return Err(Duration::MAX);
        }
        let rate = f64::from(per_sec);
        let since = now.saturating_duration_since(self.at).as_secs_f64();
        self.retries = (self.retries + since * rate).min(rate);
        self.at = now;
        if self.retries >= 1.0 {
            self.retries -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.retries) / rate))
        }
    }
}
