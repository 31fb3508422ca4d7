//! The credential's gate: its rate budget, and the pause a server's "slow down" sets.
//!
//! Document 000: "Respect the credential-wide rate budget." A client sends for one credential,
//! so one gate per client (shared by its clones) spaces its attempts: never more than
//! `requests` in any span of `per` (a sliding log, so a server counting in fixed windows of any
//! alignment never sees more).
//!
//! A 429 or 503 with `Retry-After`, or a `RateLimit` field with nothing remaining, closes the
//! gate for every call of the credential until that instant: the other hundred calls do not
//! each discover the limit on their own. Calls that reach the gate meanwhile wait there if their
//! budget allows, else stop at once with `budget_exhausted`. At the instant, the waiters are not
//! released together: each adds a uniform jitter of up to a fifth of the pause (at most 5 s),
//! so a herd held back for a second arrives over the next 200 ms instead of in one burst.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rand::Rng;
use tokio::time::Instant;

use crate::core::error::{Error, Result};

/// The release of a closed gate is spread over this fraction of the pause...
const RELEASE_SPREAD_DIVISOR: u32 = 5;
/// ...but never over more than this.
const MAX_RELEASE_SPREAD: Duration = Duration::from_secs(5);
/// The longest one answer closes the gate. A server may ask for more (`Retry-After:
/// 18446744073709551615` reads as 584 billion years); the call that got it stops with
/// `budget_exhausted` and the server's value, but the credential reopens after an hour: no
/// documented limit comes near it, and a larger value is a server's bug that must not stall a
/// sender for longer.
pub(crate) const MAX_PAUSE: Duration = Duration::from_secs(3600);

/// How many requests the credential may send in a period.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use hodoflow_retry::RateBudget;
///
/// let budget = RateBudget::new(100, Duration::from_secs(60))?;
/// assert_eq!(budget.requests(), 100);
/// # Ok::<(), hodoflow_retry::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateBudget {
    requests: u32,
    per: Duration,
}

impl RateBudget {
    /// `requests` per `per`, sent in bursts of at most `requests`.
    ///
    /// # Errors
    ///
    /// `invalid_input` when `requests` or `per` is zero.
    pub fn new(requests: u32, per: Duration) -> Result<Self> {
        if requests == 0 || per.is_zero() {
            return Err(Error::invalid_input(
                "a rate budget needs at least one request per positive period",
            ));
        }
        Ok(Self { requests, per })
    }

    /// The requests allowed per period.
    pub fn requests(&self) -> u32 {
        self.requests
    }

    /// The period.
    pub fn per(&self) -> Duration {
        self.per
    }
}

/// The send times of the last `requests` attempts, some possibly promised for the future.
#[derive(Debug)]
struct Log {
    budget: RateBudget,
    sent: VecDeque<Instant>,
}

#[derive(Debug, Default)]
struct State {
    log: Option<Log>,
    closed: Option<Closed>,
    /// How long the gate was closed before the span of `closed` began.
    closed_before: Duration,
}

/// The gate is closed until `until`; waiters are released over `spread` after it. It has been
/// closed without a break since `since`.
#[derive(Debug, Clone, Copy)]
struct Closed {
    until: Instant,
    spread: Duration,
    since: Instant,
}

/// Spaces the attempts of one credential.
#[derive(Debug, Default)]
pub(crate) struct RateGate {
    state: Mutex<State>,
    /// Whether the state must be read: a rate budget is set, or the gate may be closed. When
    /// neither, an attempt passes without taking the lock.
    guarded: AtomicBool,
}

impl RateGate {
    pub(crate) fn new(budget: Option<RateBudget>) -> Self {
        let log = budget.map(|budget| Log {
            budget,
            sent: VecDeque::with_capacity(budget.requests.min(4096) as usize),
        });
        Self {
            guarded: AtomicBool::new(log.is_some()),
            state: Mutex::new(State {
                log,
                ..State::default()
            }),
        }
    }

    /// Reserves a slot for an attempt at `now` and returns the wait before it may be
    /// sent, or `Err(wait)` without reserving when the wait would exceed `max_wait`.
    pub(crate) fn reserve<R: Rng + ?Sized>(
        &self,
        now: Instant,
        max_wait: Duration,
        rng: &mut R,
    ) -> Result<Duration, Duration> {
        if !self.guarded.load(Ordering::Acquire) {
            return Ok(Duration::ZERO);
        }
        let mut state = self.lock();
        let closed = match state.closed {
            Some(closed) if closed.until > now => {
                let jitter = rng.random_range(Duration::ZERO..=closed.spread);
                (closed.until - now) + jitter
            }
            Some(ended) if state.log.is_none() => {
                // Reopened: the next attempts need not lock.
                state.closed_before += ended.until - ended.since;
                state.closed = None;
                self.guarded.store(false, Ordering::Release);
                Duration::ZERO
            }
            _ => Duration::ZERO,
        };
        let Some(log) = &mut state.log else {
            return if closed <= max_wait {
                Ok(closed)
            } else {
                Err(closed)
            };
        };
        let requests = log.budget.requests as usize;
        let mut wait = closed;
        if log.sent.len() >= requests {
            // The request `requests` back must be at least `per` before this one; a period too
            // long for an `Instant` keeps the slot out of reach.
            let free_in = log.sent[log.sent.len() - requests]
                .checked_add(log.budget.per)
                .map_or(Duration::MAX, |free| free.saturating_duration_since(now));
            wait = wait.max(free_in);
        }
        let slot = now.checked_add(wait).filter(|_| wait <= max_wait);
        let Some(slot) = slot else {
            return Err(wait);
        };
        log.sent.push_back(slot);
        while log.sent.len() > requests {
            log.sent.pop_front();
        }
        Ok(wait)
    }

    /// Closes the gate from `now` for `pause`, at most [`MAX_PAUSE`]. A shorter close never
    /// shortens a longer one.
    pub(crate) fn close_for(&self, now: Instant, pause: Duration) {
        let pause = pause.min(MAX_PAUSE);
        let Some(until) = now.checked_add(pause) else {
            return;
        };
        let mut state = self.lock();
        if state.closed.is_some_and(|closed| closed.until >= until) {
            return;
        }
        let since = match state.closed {
            // Still closed: the same span goes on, longer.
            Some(closed) if closed.until > now => closed.since,
            Some(ended) => {
                state.closed_before += ended.until - ended.since;
                now
            }
            None => now,
        };
        let spread = (pause / RELEASE_SPREAD_DIVISOR).min(MAX_RELEASE_SPREAD);
        state.closed = Some(Closed {
            until,
            spread,
            since,
        });
        self.guarded.store(true, Ordering::Release);
    }

    /// How long the gate stays closed from `now`, as the server asked; `None` while it is open.
    pub(crate) fn closed_for(&self, now: Instant) -> Option<Duration> {
        if !self.guarded.load(Ordering::Acquire) {
            return None;
        }
        let closed = self.lock().closed?;
        (closed.until > now).then(|| closed.until - now)
    }

    /// How long the gate has been closed in all, up to `now`: every span a server's "slow
    /// down" closed it for, overlaps counted once.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) fn closed_time(&self, now: Instant) -> Duration {
        let state = self.lock();
        let current = state.closed.map_or(Duration::ZERO, |closed| {
            closed
                .until
                .min(now)
                .saturating_duration_since(closed.since)
        });
        state.closed_before + current
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;

    const SECOND: Duration = Duration::from_secs(1);
    const FOREVER: Duration = Duration::from_secs(3600);

    fn rng() -> StdRng {
        StdRng::seed_from_u64(0x5eed)
    }

    #[test]
    fn refuses_an_empty_budget() {
        assert!(RateBudget::new(0, SECOND).is_err());
        assert!(RateBudget::new(1, Duration::ZERO).is_err());
    }

    #[test]
    fn never_lets_more_than_the_budget_into_any_span_of_the_period() {
        let now = Instant::now();
        let gate = RateGate::new(Some(RateBudget::new(3, 4 * SECOND).unwrap()));
        let mut rng = rng();
        let mut at = |offset: Duration| {
            gate.reserve(now + offset, FOREVER, &mut rng)
                .map(|w| offset + w)
        };
        assert_eq!(at(Duration::ZERO), Ok(Duration::ZERO));
        assert_eq!(at(SECOND), Ok(SECOND));
        assert_eq!(at(SECOND), Ok(SECOND));
        // The 4th waits until 4 s after the 1st, the 5th and 6th until 4 s after the 2nd and 3rd.
        assert_eq!(at(2 * SECOND), Ok(4 * SECOND));
        assert_eq!(at(2 * SECOND), Ok(5 * SECOND));
        assert_eq!(at(2 * SECOND), Ok(5 * SECOND));
        assert_eq!(at(10 * SECOND), Ok(10 * SECOND));
    }

    #[test]
    fn does_not_reserve_a_slot_it_refuses() {
        let now = Instant::now();
        let gate = RateGate::new(Some(RateBudget::new(1, SECOND).unwrap()));
        let mut rng = rng();
        assert_eq!(
            gate.reserve(now, Duration::ZERO, &mut rng),
            Ok(Duration::ZERO)
        );
        assert_eq!(
            gate.reserve(now, Duration::from_millis(500), &mut rng),
            Err(SECOND)
        );
        assert_eq!(
            gate.reserve(now, FOREVER, &mut rng),
            Ok(SECOND),
            "the refused slot was not taken"
        );
    }

    #[test]
    fn a_closed_gate_holds_every_attempt_until_the_instant_never_earlier() {
        let now = Instant::now();
        let gate = RateGate::new(None);
        let mut rng = rng();
        assert_eq!(gate.reserve(now, FOREVER, &mut rng), Ok(Duration::ZERO));
        gate.close_for(now, 5 * SECOND);
        gate.close_for(now, SECOND);
        for _ in 0..1000 {
            let wait = gate.reserve(now, FOREVER, &mut rng).unwrap();
            assert!(
                wait >= 5 * SECOND && wait <= 6 * SECOND,
                "a shorter close never shortens a longer one; jitter up to a fifth: {wait:?}"
            );
        }
        let refused = gate.reserve(now, SECOND, &mut rng).unwrap_err();
        assert!(refused >= 5 * SECOND, "{refused:?}");
        assert_eq!(gate.closed_for(now + SECOND), Some(4 * SECOND));
        assert_eq!(
            gate.reserve(now + 5 * SECOND, FOREVER, &mut rng),
            Ok(Duration::ZERO),
            "open again at the instant"
        );
        assert_eq!(gate.closed_for(now + 5 * SECOND), None);
    }

    #[test]
    fn the_closed_time_adds_up_the_spans_and_counts_an_overlap_once() {
        let now = Instant::now();
        let gate = RateGate::new(None);
        let mut rng = rng();
        assert_eq!(gate.closed_time(now), Duration::ZERO);
        gate.close_for(now, 2 * SECOND);
        assert_eq!(gate.closed_time(now + SECOND), SECOND, "counted as it goes");
        // Closed again while closed: one span, to the later instant.
        gate.close_for(now + SECOND, 3 * SECOND);
        assert_eq!(gate.closed_time(now + 10 * SECOND), 4 * SECOND);
        // Reopened (the first attempt after it clears the state), then closed again.
        assert_eq!(
            gate.reserve(now + 10 * SECOND, FOREVER, &mut rng),
            Ok(Duration::ZERO)
        );
        gate.close_for(now + 20 * SECOND, SECOND);
        assert_eq!(gate.closed_time(now + 30 * SECOND), 5 * SECOND);
        // With a rate budget the ended span is kept until the next close.
        let paced = RateGate::new(Some(RateBudget::new(100, SECOND).unwrap()));
        paced.close_for(now, SECOND);
        paced.close_for(now + 5 * SECOND, 2 * SECOND);
        assert_eq!(paced.closed_time(now + 6 * SECOND), 2 * SECOND);
        assert_eq!(paced.closed_time(now + 60 * SECOND), 3 * SECOND);
    }

    #[test]
    fn releases_waiters_spread_over_a_fifth_of_the_pause() {
        let now = Instant::now();
        let gate = RateGate::new(None);
        gate.close_for(now, SECOND);
        let mut rng = rng();
        let waits: Vec<Duration> = (0..1000)
            .map(|_| gate.reserve(now, FOREVER, &mut rng).unwrap() - SECOND)
            .collect();
        let longest = waits.iter().max().copied().unwrap();
        assert!(longest <= Duration::from_millis(200), "{longest:?}");
        // Ten 20 ms buckets over the 200 ms spread: none holds more than twice its share.
        let mut buckets = [0u32; 10];
        for wait in &waits {
            buckets[((wait.as_millis() / 20) as usize).min(9)] += 1;
        }
        assert!(buckets.iter().all(|&n| n <= 200), "{buckets:?}");
    }

    #[test]
    fn caps_the_release_spread_at_five_seconds() {
        let now = Instant::now();
        let gate = RateGate::new(None);
        gate.close_for(now, 3600 * SECOND);
        let mut rng = rng();
        let longest = (0..1000)
            .map(|_| gate.reserve(now, 2 * FOREVER, &mut rng).unwrap())
            .max()
            .unwrap();
        assert!(longest <= 3605 * SECOND, "{longest:?}");
        assert!(longest > 3604 * SECOND, "the spread is used: {longest:?}");
    }

    #[test]
    fn a_pause_past_any_instant_closes_for_an_hour_and_never_panics() {
        let now = Instant::now();
        let gate = RateGate::new(None);
        let mut rng = rng();
        gate.close_for(now, Duration::MAX);
        let refused = gate.reserve(now, SECOND, &mut rng).unwrap_err();
        assert!(
            refused >= MAX_PAUSE && refused <= MAX_PAUSE + MAX_RELEASE_SPREAD,
            "{refused:?}"
        );
        assert!(gate.reserve(now, Duration::MAX, &mut rng).is_ok());
        assert_eq!(
            gate.reserve(now + MAX_PAUSE, FOREVER, &mut rng),
            Ok(Duration::ZERO),
            "open again after the hour"
        );
    }

    #[test]
    fn a_period_past_any_instant_refuses_the_second_attempt_without_panicking() {
        let now = Instant::now();
        let gate = RateGate::new(Some(RateBudget::new(1, Duration::MAX).unwrap()));
        let mut rng = rng();
        assert_eq!(gate.reserve(now, FOREVER, &mut rng), Ok(Duration::ZERO));
        assert_eq!(gate.reserve(now, FOREVER, &mut rng), Err(Duration::MAX));
        assert_eq!(
            gate.reserve(now, Duration::MAX, &mut rng),
            Err(Duration::MAX),
            "no instant holds the slot, however long the caller waits"
        );
    }

    #[test]
    fn a_closed_gate_and_the_rate_budget_add_up() {
        let now = Instant::now();
        let gate = RateGate::new(Some(RateBudget::new(1, 10 * SECOND).unwrap()));
        let mut rng = rng();
        assert_eq!(gate.reserve(now, FOREVER, &mut rng), Ok(Duration::ZERO));
        gate.close_for(now, SECOND);
        assert_eq!(
            gate.reserve(now, FOREVER, &mut rng),
            Ok(10 * SECOND),
            "the budget's slot is later than the reopening"
        );
    }
}
