//! How much retrying one operation may do.
//!
//! Why a time budget and not only an attempt count? Document 000 asks for both: "cap attempts and
//! total elapsed time". An attempt count alone lets one `Retry-After: 3600` hold a worker for an
//! hour; a time budget alone lets fast failures hammer the server. So an operation stops at
//! whichever comes first, and the budget counts waits and attempts together on the wall clock,
//! from the first send.
//!
//! A wait that would end past the budget is not slept: the operation stops at once with
//! [`ErrorKind::BudgetExhausted`](crate::ErrorKind::BudgetExhausted), carrying the server's
//! `Retry-After`, so the caller can schedule the same request, with the same key, for later.

use std::time::Duration;

use tokio::time::Instant;

use crate::core::error::{Error, Result};

/// Limits on retrying one operation.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use hodoflow_retry::Budget;
///
/// let budget = Budget::new()
///     .max_attempts(3)
///     .max_elapsed(Duration::from_secs(20));
/// budget.validate()?;
/// # Ok::<(), hodoflow_retry::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[must_use]
pub struct Budget {
    pub(crate) max_attempts: u32,
    pub(crate) max_elapsed: Duration,
    pub(crate) attempt_timeout: Duration,
    pub(crate) wait_for_in_progress: bool,
    pub(crate) count_paced_attempts: bool,
}

impl Budget {
    /// The default number of attempts, the first included: 5.
    pub const DEFAULT_MAX_ATTEMPTS: u32 = 5;
    /// The default elapsed-time budget: 60 s.
    pub const DEFAULT_MAX_ELAPSED: Duration = Duration::from_secs(60);
    /// The default timeout of one attempt: 15 s.
    pub const DEFAULT_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(15);
    /// The longest `max_elapsed` and `attempt_timeout`: 24 hours. A call that must outlive it
    /// belongs in the outbox; a longer value is a typo (`5000000000000h` wedged an outbox with
    /// leases ending at `i64::MAX`), refused by [`validate`](Self::validate).
    pub const MAX: Duration = Duration::from_secs(24 * 3600);

    /// The default budget: 5 attempts, 60 s elapsed, 15 s per attempt, no waiting for a key in
    /// progress.
    pub const fn new() -> Self {
        Self {
            max_attempts: Self::DEFAULT_MAX_ATTEMPTS,
            max_elapsed: Self::DEFAULT_MAX_ELAPSED,
            attempt_timeout: Self::DEFAULT_ATTEMPT_TIMEOUT,
            wait_for_in_progress: false,
            count_paced_attempts: false,
        }
    }

    /// Sets the most attempts one operation makes on its own schedule.
    ///
    /// An attempt the server paced (its answer is retried and carries a `Retry-After` of at least
    /// [`RetryBudget::FREE_AFTER_RETRY_AFTER`](crate::RetryBudget::FREE_AFTER_RETRY_AFTER), which
    /// the next attempt waits for) is not counted here: it is bounded by
    /// [`max_elapsed`](Self::max_elapsed) alone, and the server's own pacing (at least a second
    /// between such attempts, growing with the backoff) bounds how many there can be. So a server
    /// that sheds load with `503` or `429` and `Retry-After` for longer than five answers does not
    /// cost the operation; see [`count_paced_attempts`](Self::count_paced_attempts) to count them.
    /// Nor is a probe the service refused: while the client's retry budget holds calls because
    /// the service is down, one held attempt at a time goes as its probe, and a refusal only
    /// tells it the outage goes on (see [`RetryBudget`](crate::RetryBudget)); the probe pace
    /// bounds that load. `max_attempts(1)` turns retrying off: one request, paced or not.
    ///
    /// Default: 5 attempts, the first included. At least 1.
    pub const fn max_attempts(mut self, max_attempts: u32) -> Self {
        self.max_attempts = max_attempts;
        self
    }

    /// Sets the elapsed-time budget: waits and attempts together, on the wall clock, from the
    /// first send.
    ///
    /// Default: 60 s. More than zero.
    pub const fn max_elapsed(mut self, max_elapsed: Duration) -> Self {
        self.max_elapsed = max_elapsed;
        self
    }

    /// Sets the timeout of one attempt, clamped to what remains of the elapsed-time budget.
    ///
    /// Default: 15 s. More than zero.
    pub const fn attempt_timeout(mut self, attempt_timeout: Duration) -> Self {
        self.attempt_timeout = attempt_timeout;
        self
    }

    /// Sets whether a `409 idempotency_key_in_progress` is waited out (its `Retry-After`, or
    /// backoff) within the budget, instead of stopping at once with
    /// [`ErrorKind::InProgress`](crate::ErrorKind::InProgress).
    ///
    /// Default: `false`. Turn it on when another worker may hold the same key and the answer of
    /// the first request is worth waiting for.
    pub const fn wait_for_in_progress(mut self, wait: bool) -> Self {
        self.wait_for_in_progress = wait;
        self
    }

    /// Sets whether attempts the server paced with `Retry-After` count against
    /// [`max_attempts`](Self::max_attempts) like any other.
    ///
    /// Default: `false`: a call that the server keeps asking to come back later keeps coming
    /// back, at the server's pace, until [`max_elapsed`](Self::max_elapsed) runs out (issue 18:
    /// with every shed answer spending one of five attempts, a call outlived only 5 to 8 s of
    /// shedding, and a fleet lost 24,215 events to triggers that ended within the budget). Set
    /// `true` for a hard cap on requests per operation whatever the server says: refused probes
    /// of the retry budget then count too.
    ///
    /// # Examples
    ///
    /// ```
    /// use hodoflow_retry::Budget;
    ///
    /// // At most three requests, even while the server answers `503` with `Retry-After`.
    /// let strict = Budget::new().max_attempts(3).count_paced_attempts(true);
    /// # let _ = strict;
    /// ```
    pub const fn count_paced_attempts(mut self, count: bool) -> Self {
        self.count_paced_attempts = count;
        self
    }

    /// Checks the budget.
    ///
    /// # Errors
    ///
    /// An [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) error when `max_attempts`
    /// is 0, or `max_elapsed` or `attempt_timeout` is zero or over [`Budget::MAX`].
    pub fn validate(&self) -> Result<()> {
        for (name, value) in [
            ("max_elapsed", self.max_elapsed),
            ("attempt_timeout", self.attempt_timeout),
        ] {
            if value > Self::MAX {
                return Err(Error::invalid_input(format!(
                    "budget {name} of {value:?} is over the 24 h maximum"
                )));
            }
        }
        if self.max_attempts == 0 {
            return Err(Error::invalid_input(
                "budget max_attempts is 0; at least 1 is needed",
            ));
        }
        if self.max_elapsed.is_zero() {
            return Err(Error::invalid_input("budget max_elapsed is zero"));
        }
        if self.attempt_timeout.is_zero() {
            return Err(Error::invalid_input("budget attempt_timeout is zero"));
        }
        Ok(())
    }
}

impl Default for Budget {
    fn default() -> Self {
        Self::new()
    }
}

/// A wait refused because it would end past the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Exhausted {
    /// The wait that was refused.
    pub(crate) wait: Duration,
    /// What remained of the budget when it was refused.
    pub(crate) remaining: Duration,
}

/// One operation's budget, running from its first send.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline {
    budget: Budget,
    started: Instant,
    /// `None` when the budget reaches past what an `Instant` can hold.
    end: Option<Instant>,
}

impl Deadline {
    /// Starts `budget` at `now`, the first send.
    pub(crate) fn start(budget: Budget, now: Instant) -> Self {
        Self {
            budget,
            started: now,
            end: now.checked_add(budget.max_elapsed),
        }
    }

    /// The time since the first send.
    pub(crate) fn elapsed(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.started)
    }

    /// What remains of the elapsed-time budget; zero once it is spent.
    pub(crate) fn remaining(&self, now: Instant) -> Duration {
        match self.end {
            Some(end) => end.saturating_duration_since(now),
            None => self.budget.max_elapsed.saturating_sub(self.elapsed(now)),
        }
    }

    /// The timeout for an attempt starting at `now`: the attempt timeout clamped to what
    /// remains. `None` when nothing remains: stop with an exhausted budget.
    pub(crate) fn attempt_timeout(&self, now: Instant) -> Option<Duration> {
        let remaining = self.remaining(now);
        (!remaining.is_zero()).then(|| self.budget.attempt_timeout.min(remaining))
    }

    /// The attempt timeout as configured, unclamped by the time left: the bound of a shared
    /// token exchange, which other calls may wait for after this one has given up.
    pub(crate) fn attempt_limit(&self) -> Duration {
        self.budget.attempt_timeout
    }

    /// How long an attempt starting at `now` may be held while the service is down: what
    /// remains, less one attempt's time (the attempt timeout, at most a quarter of the budget),
    /// so a held attempt that is released is still answered in time.
    pub(crate) fn hold(&self, now: Instant) -> Duration {
        let attempt = self.budget.attempt_timeout.min(self.budget.max_elapsed / 4);
        self.remaining(now).saturating_sub(attempt)
    }

    /// How long an attempt starting at `now` may wait in all, held and then due for a probe
    /// slot: what remains, less half an attempt's time, so the attempt that goes still has at
    /// least that long to be answered (an attempt sent with a moment left would time out, and a
    /// timeout may have run).
    pub(crate) fn due(&self, now: Instant) -> Duration {
        let attempt = self.budget.attempt_timeout.min(self.budget.max_elapsed / 4);
        self.remaining(now).saturating_sub(attempt / 2)
    }

    /// The whole elapsed-time budget.
    pub(crate) fn max_elapsed(&self) -> Duration {
        self.budget.max_elapsed
    }

    /// How many more attempts may be made after `made` that count against `max_attempts`.
    pub(crate) fn attempts_left(&self, made: u32) -> u32 {
        self.budget.max_attempts.saturating_sub(made)
    }

    /// Whether a retried attempt counts against `max_attempts`: not when it was `free` (the
    /// server paced it with `Retry-After`, or it was the retry budget's probe and the service
    /// refused it), unless retrying is off or paced attempts are counted (see
    /// [`Budget::max_attempts`]).
    pub(crate) fn counts(&self, free: bool) -> bool {
        !free || self.budget.count_paced_attempts || self.budget.max_attempts == 1
    }

    /// Whether `wait`, starting at `now`, may be slept. A wait that would end at or past the end
    /// of the budget may not: it would leave no time for the attempt it waits for.
    pub(crate) fn check_wait(&self, wait: Duration, now: Instant) -> Result<(), Exhausted> {
        let remaining = self.remaining(now);
        if wait < remaining {
            Ok(())
        } else {
            Err(Exhausted { wait, remaining })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::error::ErrorKind;
    use tokio::time::advance;

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn defaults_are_5_attempts_60_s_and_15_s_per_attempt() {
        let budget = Budget::default();
        assert_eq!(budget, Budget::new());
        assert_eq!(budget.max_attempts, 5);
        assert_eq!(budget.max_elapsed, Duration::from_secs(60));
        assert_eq!(budget.attempt_timeout, Duration::from_secs(15));
        assert!(!budget.wait_for_in_progress);
        assert!(budget.validate().is_ok());
    }

    #[test]
    fn validation_refuses_zero_attempts_and_zero_durations() {
        let invalid = [
            Budget::new().max_attempts(0),
            Budget::new().max_elapsed(Duration::ZERO),
            Budget::new().attempt_timeout(Duration::ZERO),
        ];
        for budget in invalid {
            let error = budget.validate().expect_err("invalid budget");
            assert_eq!(error.kind(), ErrorKind::InvalidInput);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn clamps_the_attempt_timeout_to_what_remains() {
        let deadline = Deadline::start(Budget::new(), Instant::now());
        assert_eq!(deadline.attempt_timeout(Instant::now()), Some(15 * SECOND));

        advance(50 * SECOND).await;
        assert_eq!(deadline.remaining(Instant::now()), 10 * SECOND);
        assert_eq!(deadline.attempt_timeout(Instant::now()), Some(10 * SECOND));
        assert_eq!(deadline.elapsed(Instant::now()), 50 * SECOND);
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_remains_once_the_budget_is_spent() {
        let deadline = Deadline::start(Budget::new(), Instant::now());
        advance(60 * SECOND).await;
        assert_eq!(deadline.remaining(Instant::now()), Duration::ZERO);
        assert_eq!(deadline.attempt_timeout(Instant::now()), None);

        advance(SECOND).await;
        assert_eq!(deadline.attempt_timeout(Instant::now()), None);
    }

    #[tokio::test(start_paused = true)]
    async fn budget_stop_refuses_a_wait_that_ends_past_the_budget() {
        let deadline = Deadline::start(Budget::new(), Instant::now());
        advance(40 * SECOND).await;
        let now = Instant::now();

        assert_eq!(deadline.check_wait(19 * SECOND, now), Ok(()));
        assert_eq!(
            deadline.check_wait(20 * SECOND, now),
            Err(Exhausted {
                wait: 20 * SECOND,
                remaining: 20 * SECOND
            })
        );
        assert!(deadline.check_wait(Duration::MAX, now).is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn counts_attempts_with_the_first_included() {
        let deadline = Deadline::start(Budget::new().max_attempts(3), Instant::now());
        assert_eq!(deadline.attempts_left(1), 2);
        assert_eq!(deadline.attempts_left(3), 0);
        assert_eq!(deadline.attempts_left(7), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_budget_beyond_any_instant_never_runs_out() {
        let deadline = Deadline::start(Budget::new().max_elapsed(Duration::MAX), Instant::now());
        advance(3600 * SECOND).await;
        assert_eq!(
            deadline.remaining(Instant::now()),
            Duration::MAX - 3600 * SECOND,
            "what is left, though no instant can hold its end"
        );
        assert_eq!(deadline.attempt_timeout(Instant::now()), Some(15 * SECOND));
    }
}
