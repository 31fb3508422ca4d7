//! The credential's rate budget, shared by every operation of a client.
//!
//! Document 000: "Respect the credential-wide rate budget." A client sends
//! for one credential, so one gate per client spaces its attempts: never more
//! than `requests` in any span of `per` (a sliding log, so a server counting in
//! fixed windows of any alignment never sees more). A 429 with `Retry-After`
//! pauses every operation of its lane, so concurrent operations do not each
//! discover the limit on their own: the API's limit is the credential's, a
//! webhook's is its trigger's (document 001), so each trigger is a lane of its own.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::{Error, Result};

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

/// Who a 429 speaks for: the credential's API budget, or one webhook trigger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Lane {
    /// JSON:API reads and writes, GraphQL.
    Api,
    /// One trigger, by a hash of its path: the token itself is never kept here.
    Trigger(u64),
}

impl Lane {
    /// The lane of the webhook trigger at `path`.
    pub(crate) fn trigger(path: &str) -> Self {
        let mut hasher = DefaultHasher::new();
        path.hash(&mut hasher);
        Lane::Trigger(hasher.finish())
    }
}

#[derive(Debug, Default)]
struct State {
    log: Option<Log>,
    paused_until: HashMap<Lane, Instant>,
}

/// Spaces the attempts of one client.
#[derive(Debug, Default)]
pub(crate) struct RateGate {
    state: Mutex<State>,
}

impl RateGate {
    pub(crate) fn new(budget: Option<RateBudget>) -> Self {
        let log = budget.map(|budget| Log {
            budget,
            sent: VecDeque::with_capacity(budget.requests.min(4096) as usize),
        });
        Self {
            state: Mutex::new(State {
                log,
                paused_until: HashMap::new(),
            }),
        }
    }

    /// Reserves a slot for an attempt at `now` and returns the wait before it may be
    /// sent, or `Err(wait)` without reserving when the wait would exceed `max_wait`.
    pub(crate) fn reserve(
        &self,
        lane: Lane,
        now: Instant,
        max_wait: Duration,
    ) -> Result<Duration, Duration> {
        let mut state = self.lock();
        let paused = state
            .paused_until
            .get(&lane)
            .map_or(Duration::ZERO, |until| until.saturating_duration_since(now));
        let Some(log) = &mut state.log else {
            return if paused <= max_wait {
                Ok(paused)
            } else {
                Err(paused)
            };
        };
        let requests = log.budget.requests as usize;
        let mut slot = now + paused;
        if log.sent.len() >= requests {
            // The request `requests` back must be at least `per` before this one.
            slot = slot.max(log.sent[log.sent.len() - requests] + log.budget.per);
        }
        let wait = slot.saturating_duration_since(now);
        if wait > max_wait {
            return Err(wait);
        }
        log.sent.push_back(slot);
        while log.sent.len() > requests {
            log.sent.pop_front();
        }
        Ok(wait)
    }

    /// Holds every attempt in `lane` until `until` (a 429's `Retry-After`).
    pub(crate) fn pause_until(&self, lane: Lane, until: Instant) {
        let mut state = self.lock();
        let now = Instant::now();
        state.paused_until.retain(|_, paused| *paused > now);
        let paused = state.paused_until.entry(lane).or_insert(until);
        *paused = (*paused).max(until);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);
    const FOREVER: Duration = Duration::from_secs(3600);

    #[test]
    fn refuses_an_empty_budget() {
        assert!(RateBudget::new(0, SECOND).is_err());
        assert!(RateBudget::new(1, Duration::ZERO).is_err());
    }

    #[test]
    fn never_lets_more_than_the_budget_into_any_span_of_the_period() {
        let now = Instant::now();
        let gate = RateGate::new(Some(RateBudget::new(3, 4 * SECOND).unwrap()));
        let at = |offset: Duration| {
            gate.reserve(Lane::Api, now + offset, FOREVER)
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
        assert_eq!(
            gate.reserve(Lane::Api, now, Duration::ZERO),
            Ok(Duration::ZERO)
        );
        assert_eq!(
            gate.reserve(Lane::Api, now, Duration::from_millis(500)),
            Err(SECOND)
        );
        assert_eq!(
            gate.reserve(Lane::Api, now, FOREVER),
            Ok(SECOND),
            "the refused slot was not taken"
        );
    }

    #[test]
    fn a_429_pause_holds_only_its_own_lane() {
        let now = Instant::now();
        let gate = RateGate::new(None);
        let (trigger, other) = (
            Lane::trigger("/api/v1/webhooks/a"),
            Lane::trigger("/api/v1/webhooks/b"),
        );
        gate.pause_until(trigger, now + SECOND);
        assert_eq!(gate.reserve(trigger, now, FOREVER), Ok(SECOND));
        assert_eq!(gate.reserve(other, now, FOREVER), Ok(Duration::ZERO));
        assert_eq!(gate.reserve(Lane::Api, now, FOREVER), Ok(Duration::ZERO));
    }

    #[test]
    fn a_429_pause_holds_every_attempt_without_a_bucket() {
        let now = Instant::now();
        let gate = RateGate::new(None);
        assert_eq!(gate.reserve(Lane::Api, now, FOREVER), Ok(Duration::ZERO));
        gate.pause_until(Lane::Api, now + 3 * SECOND);
        gate.pause_until(Lane::Api, now + SECOND);
        assert_eq!(
            gate.reserve(Lane::Api, now, FOREVER),
            Ok(3 * SECOND),
            "a shorter pause never shortens a longer one"
        );
        assert_eq!(gate.reserve(Lane::Api, now, SECOND), Err(3 * SECOND));
        assert_eq!(
            gate.reserve(Lane::Api, now + 3 * SECOND, FOREVER),
            Ok(Duration::ZERO)
        );
    }
}
