//! The gate: the credential's rate budget, and every scope a server closed until an instant.
//!
//! Hodoflow's "Idempotency and retries": "Respect the credential-wide rate budget." A client sends
//! for one credential, so one gate per client (shared by its clones) spaces its attempts: never
//! more than `requests` in any span of `per` (a sliding log, so a server counting in fixed windows
//! of any alignment never sees more). The rate budget is the caller's own cap on every attempt the
//! credential sends.
//!
//! A server's "slow down" (a status the vendor's profile names, with `Retry-After`; a
//! `RateLimit` field with nothing remaining) closes **the scope it belongs to** until that
//! instant, and nothing else (`scope.rs`): a webhook route's 429 closes that route, a
//! JSON:API 429 the credential's API budget. Calls that sit in a closed scope and reach the gate
//! meanwhile wait there if their budget allows, else stop at once with `budget_exhausted`,
//! nothing sent; calls in any other scope pass. At the instant the waiters are not released
//! together: each adds a uniform jitter of up to a fifth of the pause (at most 5 s), so a herd
//! held back for a second arrives over the next 200 ms instead of in one burst.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rand::Rng;
use tokio::time::Instant;

use crate::core::error::{Error, Result};
use crate::core::jitter::Jitter;
use crate::core::limit::scope::{Closing, Scope, Signal, Why};
use crate::core::limit::{Ask, Limiter, Refusal};
use crate::core::runtime;

/// The release of a closed scope is spread over this fraction of the pause...
const RELEASE_SPREAD_DIVISOR: u32 = 5;
/// ...but never over more than this.
const MAX_RELEASE_SPREAD: Duration = Duration::from_secs(5);
/// The longest one answer closes a scope. A server may ask for more (`Retry-After:
/// 18446744073709551615` reads as 584 billion years); the call that got it stops with
/// `budget_exhausted` and the server's value, but the scope reopens after an hour: no
/// documented limit comes near it, and a larger value is a server's bug that must not stall a
/// sender for longer.
pub(crate) const MAX_PAUSE: Duration = Duration::from_secs(3600);
/// Closed scopes kept at most; past this, the ones that already reopened are forgotten first,
/// then the one that reopens soonest.
const KEEP_CLOSED: usize = 4096;

/// How many requests the credential may send in a period.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use hodoflow_retry::limit::RateBudget;
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
    closed: HashMap<Scope, Closed>,
    /// How long the credential was closed before the span of its current closure began.
    credential_closed_before: Duration,
    /// How long routes were closed, route by route, in spans that ended.
    routes_closed_before: Duration,
}

/// A scope closed until `until`; waiters are released over `spread` after it. It has been
/// closed without a break since `since`.
#[derive(Debug, Clone, Copy)]
struct Closed {
    until: Instant,
    spread: Duration,
    since: Instant,
    why: Why,
}

/// A wait the gate refused: how long it would have been (the release spread included), and
/// the closed scope behind it and how long until it reopens (`None`: the rate budget).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Held {
    pub(crate) wait: Duration,
    pub(crate) by: Option<(Scope, Why, Duration)>,
}

/// Spaces the attempts of one credential and holds the scopes a server closed.
#[derive(Debug)]
pub(crate) struct Gate {
    state: Mutex<State>,
    /// Whether the state must be read: a rate budget is set, or a scope may be closed. When
    /// neither, an attempt passes without taking the lock.
    guarded: AtomicBool,
    /// The draws of the release spread.
    jitter: Jitter,
}

impl Gate {
    pub(crate) fn new(budget: Option<RateBudget>, jitter: Jitter) -> Self {
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
            jitter,
        }
    }

    /// Reserves a slot for an attempt in `scope` at `now` and returns the wait before it may
    /// be sent, or the wait and what holds it, without reserving, when it would exceed
    /// `max_wait`.
    pub(crate) fn reserve<R: Rng + ?Sized>(
        &self,
        scope: Scope,
        now: Instant,
        max_wait: Duration,
        rng: &mut R,
    ) -> std::result::Result<Duration, Held> {
        if !self.guarded.load(Ordering::Acquire) {
            return Ok(Duration::ZERO);
        }
        let mut state = self.lock();
        let (closed, by) = match state.closed.get(&scope).copied() {
            Some(closed) if closed.until > now => {
                let jitter = rng.random_range(Duration::ZERO..=closed.spread);
                let opens_in = closed.until - now;
                (opens_in + jitter, Some((scope, closed.why, opens_in)))
            }
            Some(ended) => {
                state.forget(scope, ended);
                (Duration::ZERO, None)
            }
            None => (Duration::ZERO, None),
        };
        if state.log.is_none() && state.closed.is_empty() {
            // Nothing closed, no rate budget: the next attempts need not lock.
            self.guarded.store(false, Ordering::Release);
        }
        let Some(log) = &mut state.log else {
            return if closed <= max_wait {
                Ok(closed)
            } else {
                Err(Held { wait: closed, by })
            };
        };
        let requests = log.budget.requests as usize;
        let mut wait = closed;
        let mut by = by;
        if log.sent.len() >= requests {
            // The request `requests` back must be at least `per` before this one; a period too
            // long for an `Instant` keeps the slot out of reach.
            let free_in = log.sent[log.sent.len() - requests]
                .checked_add(log.budget.per)
                .map_or(Duration::MAX, |free| free.saturating_duration_since(now));
            if free_in > wait {
                wait = free_in;
                by = None;
            }
        }
        let slot = now.checked_add(wait).filter(|_| wait <= max_wait);
        let Some(slot) = slot else {
            return Err(Held { wait, by });
        };
        log.sent.push_back(slot);
        while log.sent.len() > requests {
            log.sent.pop_front();
        }
        Ok(wait)
    }

    /// Closes `closing.scope` from `now` for `closing.pause`, at most [`MAX_PAUSE`]. A shorter
    /// close never shortens a longer one.
    pub(crate) fn close(&self, closing: Closing, now: Instant) {
        let pause = closing.pause.min(MAX_PAUSE);
        let Some(until) = now.checked_add(pause) else {
            return;
        };
        let mut state = self.lock();
        let current = state.closed.get(&closing.scope).copied();
        if current.is_some_and(|closed| closed.until >= until) {
            return;
        }
        let since = match current {
            // Still closed: the same span goes on, longer.
            Some(closed) if closed.until > now => closed.since,
            Some(ended) => {
                state.forget(closing.scope, ended);
                now
            }
            None => now,
        };
        if !state.closed.contains_key(&closing.scope) && state.closed.len() >= KEEP_CLOSED {
            state.make_room(now);
        }
        let spread = (pause / RELEASE_SPREAD_DIVISOR).min(MAX_RELEASE_SPREAD);
        state.closed.insert(
            closing.scope,
            Closed {
                until,
                spread,
                since,
                why: closing.why,
            },
        );
        self.guarded.store(true, Ordering::Release);
    }

    /// How long `scope` stays closed from `now`, as the server asked; `None` while it is open.
    pub(crate) fn closed_for(&self, scope: Scope, now: Instant) -> Option<Duration> {
        if !self.guarded.load(Ordering::Acquire) {
            return None;
        }
        let closed = *self.lock().closed.get(&scope)?;
        (closed.until > now).then(|| closed.until - now)
    }

    /// Every scope closed at `now`: how long it stays closed, and why.
    pub(crate) fn closed(&self, now: Instant) -> Vec<(Scope, Duration, Why)> {
        if !self.guarded.load(Ordering::Acquire) {
            return Vec::new();
        }
        let mut closed: Vec<_> = self
            .lock()
            .closed
            .iter()
            .filter(|(_, closed)| closed.until > now)
            .map(|(scope, closed)| (*scope, closed.until - now, closed.why))
            .collect();
        closed.sort_by_key(|(_, left, _)| std::cmp::Reverse(*left));
        closed
    }

    /// How long the credential has been closed in all, up to `now` (every span a server's
    /// "slow down" closed it for, overlaps counted once), and how long routes have been, each
    /// route's spans added up.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) fn closed_time(&self, now: Instant) -> (Duration, Duration) {
        let state = self.lock();
        let (mut credential, mut routes) =
            (state.credential_closed_before, state.routes_closed_before);
        for (scope, closed) in &state.closed {
            let span = closed
                .until
                .min(now)
                .saturating_duration_since(closed.since);
            match scope {
                Scope::Credential => credential += span,
                _ => routes += span,
            }
        }
        (credential, routes)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl State {
    /// `scope` reopened after `ended`: its span is counted and the entry dropped.
    fn forget(&mut self, scope: Scope, ended: Closed) {
        let span = ended.until - ended.since;
        match scope {
            Scope::Credential => self.credential_closed_before += span,
            _ => self.routes_closed_before += span,
        }
        self.closed.remove(&scope);
    }

    /// Room for one more closed scope: the reopened ones go, else the one that reopens soonest.
    fn make_room(&mut self, now: Instant) {
        let ended: Vec<(Scope, Closed)> = self
            .closed
            .iter()
            .filter(|(_, closed)| closed.until <= now)
            .map(|(scope, closed)| (*scope, *closed))
            .collect();
        if ended.is_empty()
            && let Some(soonest) = self
                .closed
                .iter()
                .min_by_key(|(_, closed)| closed.until)
                .map(|(scope, _)| *scope)
        {
            self.closed.remove(&soonest);
        }
        for (scope, closed) in ended {
            self.forget(scope, closed);
        }
    }
}

impl Limiter for Gate {
    type Permit = ();

    /// Waits while the attempt's scope is closed, and for the credential's rate budget; refuses
    /// a wait that would leave no time for the attempt.
    async fn admit(&self, ask: &Ask<'_>) -> std::result::Result<(), Refusal> {
        if !self.guarded.load(Ordering::Acquire) {
            return Ok(());
        }
        let now = runtime::now();
        let max_wait = ask.max_wait();
        let reserved = self
            .jitter
            .with(|rng| self.reserve(ask.scope, now, max_wait, rng));
        match reserved {
            Ok(wait) if wait.is_zero() => Ok(()),
            Ok(wait) => {
                let (hold, route) = match ask.scope {
                    Scope::Route(_) => (&ask.counters.route_hold, true),
                    _ => (&ask.counters.gate_hold, false),
                };
                if route {
                    ask.counters.waited_for_route(wait);
                } else {
                    ask.counters.waited_at_gate(wait);
                }
                tracing::debug!(
                    wait_ms = wait.as_millis() as u64,
                    scope = %ask.scope.label(),
                    "waiting for a closed scope or the credential's rate budget"
                );
                let _held = hold.begin(None);
                runtime::sleep(wait).await;
                Ok(())
            }
            Err(Held { wait, by }) => Err(Refusal::past_budget(match by {
                Some((scope, why, _)) => format!(
                    "{} is closed for {:.1}s ({}), past the {:.1}s this call has left to wait",
                    scope.label(),
                    wait.as_secs_f64(),
                    why.describe(),
                    max_wait.as_secs_f64()
                ),
                None => format!(
                    "the credential's rate budget has no slot for {:.1}s, past the {:.1}s this call has left to wait",
                    wait.as_secs_f64(),
                    max_wait.as_secs_f64()
                ),
            })
            .with_retry_after(by.map_or(wait, |(_, _, opens_in)| opens_in))),
        }
    }

    /// Closes the scope the answer closes, if any.
    fn heard(&self, (): (), _: &Ask<'_>, signal: &Signal<'_>) {
        if let Some(closing) = signal.closes {
            self.close(closing, runtime::now());
            tracing::debug!(
                wait_ms = closing.pause.as_millis() as u64,
                scope = %closing.scope.label(),
                "the server closed a scope"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;
    use crate::core::limit::scope::RouteKey;

    const SECOND: Duration = Duration::from_secs(1);
    const FOREVER: Duration = Duration::from_secs(3600);

    fn rng() -> StdRng {
        StdRng::seed_from_u64(0x5eed)
    }

    /// The credential closed for `pause` by a 429 with `Retry-After`.
    fn closing(pause: Duration) -> Closing {
        Closing {
            scope: Scope::Credential,
            pause,
            why: Why::RetryAfter(429),
        }
    }

    #[test]
    fn refuses_an_empty_budget() {
        assert!(RateBudget::new(0, SECOND).is_err());
        assert!(RateBudget::new(1, Duration::ZERO).is_err());
    }

    #[test]
    fn never_lets_more_than_the_budget_into_any_span_of_the_period() {
        let now = Instant::now();
        let gate = Gate::new(
            Some(RateBudget::new(3, 4 * SECOND).unwrap()),
            Jitter::new(Some(1)),
        );
        let mut rng = rng();
        let mut at = |offset: Duration| {
            gate.reserve(Scope::Credential, now + offset, FOREVER, &mut rng)
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
        let gate = Gate::new(
            Some(RateBudget::new(1, SECOND).unwrap()),
            Jitter::new(Some(1)),
        );
        let mut rng = rng();
        assert_eq!(
            gate.reserve(Scope::Credential, now, Duration::ZERO, &mut rng),
            Ok(Duration::ZERO)
        );
        assert_eq!(
            gate.reserve(Scope::Credential, now, Duration::from_millis(500), &mut rng),
            Err(Held {
                wait: SECOND,
                by: None
            })
        );
        assert_eq!(
            gate.reserve(Scope::Credential, now, FOREVER, &mut rng),
            Ok(SECOND),
            "the refused slot was not taken"
        );
    }

    #[test]
    fn a_closed_gate_holds_every_attempt_until_the_instant_never_earlier() {
        let now = Instant::now();
        let gate = Gate::new(None, Jitter::new(Some(1)));
        let mut rng = rng();
        assert_eq!(
            gate.reserve(Scope::Credential, now, FOREVER, &mut rng),
            Ok(Duration::ZERO)
        );
        gate.close(closing(5 * SECOND), now);
        gate.close(closing(SECOND), now);
        for _ in 0..1000 {
            let wait = gate
                .reserve(Scope::Credential, now, FOREVER, &mut rng)
                .unwrap();
            assert!(
                wait >= 5 * SECOND && wait <= 6 * SECOND,
                "a shorter close never shortens a longer one; jitter up to a fifth: {wait:?}"
            );
        }
        let refused = gate
            .reserve(Scope::Credential, now, SECOND, &mut rng)
            .unwrap_err()
            .wait;
        assert!(refused >= 5 * SECOND, "{refused:?}");
        assert_eq!(
            gate.closed_for(Scope::Credential, now + SECOND),
            Some(4 * SECOND)
        );
        assert_eq!(
            gate.reserve(Scope::Credential, now + 5 * SECOND, FOREVER, &mut rng),
            Ok(Duration::ZERO),
            "open again at the instant"
        );
        assert_eq!(gate.closed_for(Scope::Credential, now + 5 * SECOND), None);
    }

    #[test]
    fn the_closed_time_adds_up_the_spans_and_counts_an_overlap_once() {
        let now = Instant::now();
        let gate = Gate::new(None, Jitter::new(Some(1)));
        let mut rng = rng();
        assert_eq!(gate.closed_time(now).0, Duration::ZERO);
        gate.close(closing(2 * SECOND), now);
        assert_eq!(
            gate.closed_time(now + SECOND).0,
            SECOND,
            "counted as it goes"
        );
        // Closed again while closed: one span, to the later instant.
        gate.close(closing(3 * SECOND), now + SECOND);
        assert_eq!(gate.closed_time(now + 10 * SECOND).0, 4 * SECOND);
        // Reopened (the first attempt after it clears the state), then closed again.
        assert_eq!(
            gate.reserve(Scope::Credential, now + 10 * SECOND, FOREVER, &mut rng),
            Ok(Duration::ZERO)
        );
        gate.close(closing(SECOND), now + 20 * SECOND);
        assert_eq!(gate.closed_time(now + 30 * SECOND).0, 5 * SECOND);
        // With a rate budget the ended span is kept until the next close.
        let paced = Gate::new(
            Some(RateBudget::new(100, SECOND).unwrap()),
            Jitter::new(Some(1)),
        );
        paced.close(closing(SECOND), now);
        paced.close(closing(2 * SECOND), now + 5 * SECOND);
        assert_eq!(paced.closed_time(now + 6 * SECOND).0, 2 * SECOND);
        assert_eq!(paced.closed_time(now + 60 * SECOND).0, 3 * SECOND);
    }

    #[test]
    fn releases_waiters_spread_over_a_fifth_of_the_pause() {
        let now = Instant::now();
        let gate = Gate::new(None, Jitter::new(Some(1)));
        gate.close(closing(SECOND), now);
        let mut rng = rng();
        let waits: Vec<Duration> = (0..1000)
            .map(|_| {
                gate.reserve(Scope::Credential, now, FOREVER, &mut rng)
                    .unwrap()
                    - SECOND
            })
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
        let gate = Gate::new(None, Jitter::new(Some(1)));
        gate.close(closing(3600 * SECOND), now);
        let mut rng = rng();
        let longest = (0..1000)
            .map(|_| {
                gate.reserve(Scope::Credential, now, 2 * FOREVER, &mut rng)
                    .unwrap()
            })
            .max()
            .unwrap();
        assert!(longest <= 3605 * SECOND, "{longest:?}");
        assert!(longest > 3604 * SECOND, "the spread is used: {longest:?}");
    }

    #[test]
    fn a_pause_past_any_instant_closes_for_an_hour_and_never_panics() {
        let now = Instant::now();
        let gate = Gate::new(None, Jitter::new(Some(1)));
        let mut rng = rng();
        gate.close(closing(Duration::MAX), now);
        let refused = gate
            .reserve(Scope::Credential, now, SECOND, &mut rng)
            .unwrap_err()
            .wait;
        assert!(
            refused >= MAX_PAUSE && refused <= MAX_PAUSE + MAX_RELEASE_SPREAD,
            "{refused:?}"
        );
        assert!(
            gate.reserve(Scope::Credential, now, Duration::MAX, &mut rng)
                .is_ok()
        );
        assert_eq!(
            gate.reserve(Scope::Credential, now + MAX_PAUSE, FOREVER, &mut rng),
            Ok(Duration::ZERO),
            "open again after the hour"
        );
    }

    #[test]
    fn a_period_past_any_instant_refuses_the_second_attempt_without_panicking() {
        let now = Instant::now();
        let gate = Gate::new(
            Some(RateBudget::new(1, Duration::MAX).unwrap()),
            Jitter::new(Some(1)),
        );
        let mut rng = rng();
        assert_eq!(
            gate.reserve(Scope::Credential, now, FOREVER, &mut rng),
            Ok(Duration::ZERO)
        );
        assert_eq!(
            gate.reserve(Scope::Credential, now, FOREVER, &mut rng),
            Err(Held {
                wait: Duration::MAX,
                by: None
            })
        );
        assert_eq!(
            gate.reserve(Scope::Credential, now, Duration::MAX, &mut rng),
            Err(Held {
                wait: Duration::MAX,
                by: None
            }),
            "no instant holds the slot, however long the caller waits"
        );
    }

    #[test]
    fn a_closed_gate_and_the_rate_budget_add_up() {
        let now = Instant::now();
        let gate = Gate::new(
            Some(RateBudget::new(1, 10 * SECOND).unwrap()),
            Jitter::new(Some(1)),
        );
        let mut rng = rng();
        assert_eq!(
            gate.reserve(Scope::Credential, now, FOREVER, &mut rng),
            Ok(Duration::ZERO)
        );
        gate.close(closing(SECOND), now);
        assert_eq!(
            gate.reserve(Scope::Credential, now, FOREVER, &mut rng),
            Ok(10 * SECOND),
            "the budget's slot is later than the reopening"
        );
    }

    #[test]
    fn a_closed_scope_holds_its_own_attempts_and_no_other_scope() {
        let now = Instant::now();
        let gate = Gate::new(None, Jitter::new(Some(1)));
        let mut rng = rng();
        let (a, b) = (
            Scope::Route(RouteKey::of("trg_a")),
            Scope::Route(RouteKey::of("trg_b")),
        );
        gate.close(
            Closing {
                scope: a,
                pause: 60 * SECOND,
                why: Why::RetryAfter(429),
            },
            now,
        );
        let held = gate.reserve(a, now, 10 * SECOND, &mut rng).unwrap_err();
        assert!(held.wait >= 60 * SECOND, "{held:?}");
        assert_eq!(held.by, Some((a, Why::RetryAfter(429), 60 * SECOND)));
        assert_eq!(
            gate.reserve(b, now, Duration::ZERO, &mut rng),
            Ok(Duration::ZERO)
        );
        assert_eq!(
            gate.reserve(Scope::Credential, now, Duration::ZERO, &mut rng),
            Ok(Duration::ZERO),
            "a route's 429 never closes the credential"
        );
        assert_eq!(gate.closed(now + SECOND).len(), 1);
        assert_eq!(gate.closed_for(a, now + SECOND), Some(59 * SECOND));
        assert_eq!(gate.closed_for(Scope::Credential, now), None);
    }

    #[test]
    fn keeps_a_bounded_number_of_closed_scopes() {
        let now = Instant::now();
        let gate = Gate::new(None, Jitter::new(Some(1)));
        for n in 0..KEEP_CLOSED + 10 {
            gate.close(
                Closing {
                    scope: Scope::Route(RouteKey::of(&format!("trg_{n}"))),
                    pause: SECOND * (n as u32 + 1),
                    why: Why::Spent,
                },
                now,
            );
        }
        assert_eq!(gate.closed(now).len(), KEEP_CLOSED);
    }
}
