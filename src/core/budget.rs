//! How much retrying one operation may do.
//!
//! Why a time budget and not only an attempt count? Hodoflow's "Idempotency and retries" asks
//! for both: "cap attempts and total elapsed time". An attempt count alone lets one `Retry-After:
//! 3600` hold a worker for an hour; a time budget alone lets fast failures hammer the server. So an
//! operation stops at whichever comes first.
//!
//! **The budget is the whole call.** `max_elapsed` runs from `send()` to the result: every wait
//! counts, a wait for a route's slot or a closed scope included. `max_attempts` counts every
//! request sent, except those drawn from a separate, bounded allowance of
//! [`paced_retries`](Budget::paced_retries): retries the server paced with `Retry-After`, and
//! probes the call's final attempt sends while the retry budget holds its service down, so that
//! load shedding or a blip a call could ride out within its time does not cost it its
//! attempts; at most
//! `max_attempts + paced_retries` requests are sent. No attempt starts with less than
//! [`Budget::min_attempt_time`] left, so none is sent only to time out (a timeout may have
//! run: it would turn a clean answer into "may have run"); and a wait that cannot end with that
//! much left is not slept: the operation stops at once with
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
    pub(crate) min_attempt_time: Option<Duration>,
    pub(crate) wait_for_in_progress: bool,
    pub(crate) paced_retries: u32,
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
    /// The most attempts one operation may be allowed: 1,000. Every attempt is recorded on the
    /// call's result, so the records stay bounded.
    pub const MAX_ATTEMPTS: u32 = 1000;
    /// The default least time an attempt needs: 1 s (see
    /// [`min_attempt_time`](Self::min_attempt_time)).
    pub const DEFAULT_MIN_ATTEMPT_TIME: Duration = Duration::from_secs(1);
    /// The default allowance of paced retries: 10 (see [`paced_retries`](Self::paced_retries)).
    pub const DEFAULT_PACED_RETRIES: u32 = 10;

    /// The default budget: 5 attempts and 10 paced retries, 60 s elapsed, 15 s per attempt, no
    /// waiting for a key in progress.
    pub const fn new() -> Self {
        Self {
            max_attempts: Self::DEFAULT_MAX_ATTEMPTS,
            max_elapsed: Self::DEFAULT_MAX_ELAPSED,
            attempt_timeout: Self::DEFAULT_ATTEMPT_TIMEOUT,
            min_attempt_time: None,
            wait_for_in_progress: false,
            paced_retries: Self::DEFAULT_PACED_RETRIES,
        }
    }

    /// Sets the most attempts one operation sends on its own schedule: the first, and every
    /// retry not drawn from the [`paced_retries`](Self::paced_retries) allowance.
    /// `max_attempts(1)` turns retrying off: one request, whatever the allowance.
    ///
    /// Default: 5 attempts, the first included. At least 1, at most [`Budget::MAX_ATTEMPTS`].
    pub const fn max_attempts(mut self, max_attempts: u32) -> Self {
        self.max_attempts = max_attempts;
        self
    }

    /// Sets the allowance of paced retries: retries that do not count against
    /// [`max_attempts`](Self::max_attempts) because something other than the call's own
    /// schedule paced them. A retry is paced when the server asked for it with a `Retry-After`
    /// of at least a second (load shedding: `503` or `429`), or when it is sent by the call's
    /// final attempt as the retry budget's probe of a service it holds down (a final attempt
    /// is otherwise kept for the end of its hold; its probes are spread over the hold, each once
    /// the hold has lasted its share, and a refused one takes no backoff). Each draws one from
    /// the allowance while some is left, then counts against `max_attempts` like any other;
    /// every one counts against [`max_elapsed`](Self::max_elapsed). So one operation sends at
    /// most `max_attempts + paced_retries` requests.
    ///
    /// Why: a server that sheds load for 10 to 30 s answers each attempt within a second or
    /// two; counted against five attempts, a call gives up after a few seconds of it, long
    /// before its 60 s would have outlasted it, and a fleet loses events to a server that asked
    /// only to be called back later. And a sequential sender whose final attempt is held through
    /// a blip of a few seconds would see its end only when the hold ends, most of a minute
    /// later. Set 0 for a hard cap of `max_attempts` requests whatever the server says.
    ///
    /// Default: [`Budget::DEFAULT_PACED_RETRIES`], 10. At most [`Budget::MAX_ATTEMPTS`].
    ///
    /// # Examples
    ///
    /// ```
    /// use hodoflow_retry::Budget;
    ///
    /// // Exactly three requests at most, even while the server answers `503` with `Retry-After`.
    /// let strict = Budget::new().max_attempts(3).paced_retries(0);
    /// strict.validate()?;
    /// # Ok::<(), hodoflow_retry::Error>(())
    /// ```
    pub const fn paced_retries(mut self, paced_retries: u32) -> Self {
        self.paced_retries = paced_retries;
        self
    }

    /// The paced retries a call may send beyond `max_attempts`: none when retrying is off.
    pub(crate) const fn paced_allowance(&self) -> u32 {
        if self.max_attempts > 1 {
            self.paced_retries
        } else {
            0
        }
    }

    /// Sets the elapsed-time budget: the whole call, from `send()` to its result, every wait
    /// and attempt included (a wait for a route's window or a closed scope too).
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

    /// Sets the least time an attempt needs: no attempt starts with less than this left of
    /// [`max_elapsed`](Self::max_elapsed), and a wait that would leave less is not slept; the
    /// call stops with `budget_exhausted` instead, nothing more sent. An attempt sent with a
    /// moment left would time out, and a timeout may have run: a call that had a clean answer
    /// would end "may have run".
    ///
    /// Default: [`Budget::DEFAULT_MIN_ATTEMPT_TIME`], 1 s, or a quarter of `max_elapsed` when
    /// that is shorter; never more than the attempt timeout. Less than `max_elapsed`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use hodoflow_retry::Budget;
    ///
    /// let budget = Budget::new()
    ///     .max_elapsed(Duration::from_secs(10))
    ///     .min_attempt_time(Duration::from_secs(2));
    /// assert_eq!(budget.least_attempt_time(), Duration::from_secs(2));
    /// assert_eq!(Budget::new().least_attempt_time(), Duration::from_secs(1));
    /// let short = Budget::new().max_elapsed(Duration::from_secs(2));
    /// assert_eq!(short.least_attempt_time(), Duration::from_millis(500));
    /// ```
    pub const fn min_attempt_time(mut self, least: Duration) -> Self {
        self.min_attempt_time = Some(least);
        self
    }

    /// The longest a call runs, every wait included: the one set with
    /// [`max_elapsed`](Self::max_elapsed). An outbox's lease must outlast it.
    pub fn call_time(&self) -> Duration {
        self.max_elapsed
    }

    /// The longest one attempt runs: the one set with
    /// [`attempt_timeout`](Self::attempt_timeout).
    pub fn attempt_time(&self) -> Duration {
        self.attempt_timeout
    }

    /// The least time an attempt needs, as it applies: the one set with
    /// [`min_attempt_time`](Self::min_attempt_time), else the default rule; never more than
    /// the attempt timeout.
    pub fn least_attempt_time(&self) -> Duration {
        let least = match self.min_attempt_time {
            Some(least) => least,
            None => Self::DEFAULT_MIN_ATTEMPT_TIME.min(self.max_elapsed / 4),
        };
        least.min(self.attempt_timeout)
    }

    /// Checks the budget.
    ///
    /// # Errors
    ///
    /// An [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) error when `max_attempts`
    /// is 0 or over [`Budget::MAX_ATTEMPTS`], `paced_retries` is over [`Budget::MAX_ATTEMPTS`], `max_elapsed` or `attempt_timeout` is zero or over
    /// [`Budget::MAX`], or the least attempt time is not less than `max_elapsed`.
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
        if self.max_attempts > Self::MAX_ATTEMPTS {
            return Err(Error::invalid_input(format!(
                "budget max_attempts of {} is over the maximum of {}",
                self.max_attempts,
                Self::MAX_ATTEMPTS
            )));
        }
        if self.paced_retries > Self::MAX_ATTEMPTS {
            return Err(Error::invalid_input(format!(
                "budget paced_retries of {} is over the maximum of {}",
                self.paced_retries,
                Self::MAX_ATTEMPTS
            )));
        }
        if self.max_elapsed.is_zero() {
            return Err(Error::invalid_input("budget max_elapsed is zero"));
        }
        if self.attempt_timeout.is_zero() {
            return Err(Error::invalid_input("budget attempt_timeout is zero"));
        }
        if self
            .min_attempt_time
            .is_some_and(|least| least >= self.max_elapsed)
        {
            return Err(Error::invalid_input(format!(
                "budget min_attempt_time of {:?} is not less than max_elapsed of {:?}: no attempt could start",
                self.least_attempt_time(),
                self.max_elapsed
            )));
        }
        Ok(())
    }
}

impl Default for Budget {
    fn default() -> Self {
        Self::new()
    }
}

/// A wait refused because it would leave less than an attempt's least time of the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Exhausted {
    /// The wait that was refused.
    pub(crate) wait: Duration,
    /// What remained of the budget when it was refused.
    pub(crate) remaining: Duration,
    /// The least time an attempt needs.
    pub(crate) least: Duration,
}

/// One operation's budget, running from `send()`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline {
    budget: Budget,
    started: Instant,
    /// `None` when the budget reaches past what an `Instant` can hold.
    end: Option<Instant>,
    /// [`Budget::least_attempt_time`], worked out once: each step of a call asks for it.
    least: Duration,
}

impl Deadline {
    /// Starts `budget` at `now`, the call's `send()`.
    pub(crate) fn start(budget: Budget, now: Instant) -> Self {
        Self {
            budget,
            started: now,
            end: now.checked_add(budget.max_elapsed),
            least: budget.least_attempt_time(),
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
    /// remains. `None` when less than the least attempt time remains: stop with an exhausted
    /// budget, nothing sent.
    pub(crate) fn attempt_timeout(&self, now: Instant) -> Option<Duration> {
        let remaining = self.remaining(now);
        (!remaining.is_zero() && remaining >= self.least())
            .then(|| self.budget.attempt_timeout.min(remaining))
    }

    /// The least time an attempt needs ([`Budget::least_attempt_time`]).
    pub(crate) fn least(&self) -> Duration {
        self.least
    }

    /// The longest a limiter may hold an attempt starting its wait at `now`: what remains, less
    /// the least time an attempt needs.
    pub(crate) fn max_wait(&self, now: Instant) -> Duration {
        self.remaining(now).saturating_sub(self.least())
    }

    /// The attempt timeout as configured, unclamped by the time left: the bound of a shared
    /// token exchange, which other calls may wait for after this one has given up.
    pub(crate) fn attempt_limit(&self) -> Duration {
        self.budget.attempt_timeout
    }

    /// How long an attempt starting at `now` may be held while its service is down: what
    /// remains, less one attempt's time (the attempt timeout, at most a quarter of the budget),
    /// so a held attempt that is released is still answered in time; and at least half an
    /// attempt's time before [`due`](Self::due) ends, so a held attempt has a moment to go.
    pub(crate) fn hold(&self, now: Instant) -> Duration {
        let attempt = self.attempt_time();
        self.remaining(now)
            .saturating_sub(attempt)
            .min(self.due(now).saturating_sub(attempt / 2))
    }

    /// How long an attempt starting at `now` may wait in all, held and then due for a probe
    /// slot: what remains, less half an attempt's time, so the attempt that goes still has at
    /// least that long to be answered (an attempt sent with a moment left would time out, and a
    /// timeout may have run), and never less than the least attempt time.
    pub(crate) fn due(&self, now: Instant) -> Duration {
        let attempt = self.attempt_time();
        self.remaining(now)
            .saturating_sub(attempt / 2)
            .min(self.max_wait(now))
    }

    /// One attempt's time, for the holds: the attempt timeout, at most a quarter of the budget.
    pub(crate) fn attempt_time(&self) -> Duration {
        self.budget.attempt_timeout.min(self.budget.max_elapsed / 4)
    }

    /// The whole elapsed-time budget.
    pub(crate) fn max_elapsed(&self) -> Duration {
        self.budget.max_elapsed
    }

    /// How many more attempts may be made after `made` that count against `max_attempts`.
    pub(crate) fn attempts_left(&self, made: u32) -> u32 {
        self.budget.max_attempts.saturating_sub(made)
    }

    /// Whether `wait`, starting at `now`, may be slept: only when it leaves at least the least
    /// attempt time of the budget, for the attempt it waits for.
    pub(crate) fn check_wait(&self, wait: Duration, now: Instant) -> Result<(), Exhausted> {
        let remaining = self.remaining(now);
        let least = self.least();
        if wait < remaining && remaining - wait >= least {
            Ok(())
        } else {
            Err(Exhausted {
                wait,
                remaining,
                least,
            })
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
        assert_eq!(budget.least_attempt_time(), Duration::from_secs(1));
        assert!(budget.validate().is_ok());
    }

    #[test]
    fn validation_refuses_zero_attempts_and_zero_durations() {
        let invalid = [
            Budget::new().max_attempts(0),
            Budget::new().max_attempts(Budget::MAX_ATTEMPTS + 1),
            Budget::new().max_elapsed(Duration::ZERO),
            Budget::new().attempt_timeout(Duration::ZERO),
            Budget::new()
                .max_elapsed(Duration::from_secs(2))
                .min_attempt_time(Duration::from_secs(2)),
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
    async fn no_attempt_starts_with_less_than_the_least_attempt_time_left() {
        let deadline = Deadline::start(Budget::new(), Instant::now());
        advance(59 * SECOND).await;
        assert_eq!(deadline.attempt_timeout(Instant::now()), Some(SECOND));
        advance(Duration::from_millis(1)).await;
        assert_eq!(
            deadline.attempt_timeout(Instant::now()),
            None,
            "999 ms left, an attempt needs 1 s"
        );
        assert_eq!(deadline.max_wait(Instant::now()), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn a_retry_after_that_leaves_less_than_an_attempt_is_refused_not_slept() {
        // 503 with Retry-After: 9 on a 9.5 s budget: the wait would leave 0.5 s.
        let budget = Budget::new().max_elapsed(Duration::from_millis(9500));
        let deadline = Deadline::start(budget, Instant::now());
        let refused = deadline.check_wait(9 * SECOND, Instant::now()).unwrap_err();
        assert_eq!(refused.least, SECOND);
        assert!(deadline.check_wait(8 * SECOND, Instant::now()).is_ok());
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
                remaining: 20 * SECOND,
                least: SECOND,
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
