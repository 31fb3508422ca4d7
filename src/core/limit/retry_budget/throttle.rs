//! The SRE throttle of one service: whether it is down, by the ratio of its own answers, and
//! the probes and the ramp that see it heal.
//!
//! One per service behind an endpoint ([`ServiceKey`]): webhook ingestion apart from the
//! JSON:API apart from another vendor's API, so one service's outage never holds the calls of
//! another that answers. Its evidence is its own answers, and evidence goes stale: once no
//! answer came for [`STALE_AFTER`], the next attempt goes as a probe instead of being held or
//! refused on what the service did before a quiet spell.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::SmallRng;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::RetryBudget;
use super::history::{Counts, History};
use crate::core::limit::scope::ServiceKey;

/// How old the newest answer may be and still say the service is down: the short horizon of
/// the ratio. Past it, an attempt goes as a probe.
pub(super) const STALE_AFTER: Duration = Duration::from_secs(super::history::SHORT as u64);

/// One service's throttle, shared by the calls of every client of the budget.
#[derive(Debug)]
pub(super) struct Service {
    pub(super) state: Mutex<Throttle>,
    /// Whether a first attempt may go without locking: the service is not down.
    pub(super) calm: AtomicBool,
    /// Attempts of this service admitted and not yet answered.
    pub(super) in_flight: AtomicU64,
    /// What concerns every held attempt: the ramp began or ended, the service went down or
    /// up, or a refused probe says an outage outlived a held call's budget. Woken all at once.
    pub(super) news: Notify,
    /// The probe's turn, woken one at a time: the held attempt timing the next probe left
    /// without it, or the last attempt in flight was answered. Only attempts that may go as
    /// the probe listen.
    pub(super) turn: Notify,
}

impl Service {
    pub(super) fn new(key: ServiceKey, now: Instant, seed: Option<u64>) -> Self {
        let seed = seed.map(|seed| seed ^ hash(key));
        Self {
            state: Mutex::new(Throttle {
                history: History::new(now),
                probes: Probes {
                    sent: 0,
                    next_at: now,
                    sent_at: None,
                    result: None,
                },
                down_since: None,
                prober: false,
                outlive_at: None,
                declared_at: None,
                refusing_since: None,
                failed_in_a_row: 0,
                last_answer: None,
                ramp: None,
                ramp_counts: Counts::default(),
                rng: match seed {
                    Some(seed) => SmallRng::seed_from_u64(seed),
                    None => SmallRng::from_os_rng(),
                },
            }),
            calm: AtomicBool::new(true),
            in_flight: AtomicU64::new(0),
            news: Notify::new(),
            turn: Notify::new(),
        }
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Throttle> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// An admitted attempt was answered or dropped.
    pub(super) fn left_flight(&self, waiting: bool) {
        if self.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 && waiting {
            // A probe waits for nothing to be in flight: one held attempt that may go as the
            // probe looks again, not every held attempt.
            self.turn.notify_one();
        }
    }
}

/// A stable mix of the service's key into a budget's seed, so each service draws its own ramp.
fn hash(key: ServiceKey) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    key.name.hash(&mut hasher);
    key.endpoint.hash(&mut hasher);
    hasher.finish()
}

/// What a service's answers have said.
#[derive(Debug)]
pub(super) struct Throttle {
    pub(super) history: History,
    pub(super) probes: Probes,
    /// Since when the service has been down: the first refused answer of the run of refusals
    /// that took it down, so an outage is measured from its onset, not from when the ratio
    /// crossed [`RetryBudget::DOWN_AT`].
    pub(super) down_since: Option<Instant>,
    /// Whether a held attempt is timing the next probe: it sleeps until the probe is due, and
    /// the other held attempts sleep until their own next release.
    pub(super) prober: bool,
    /// The earliest time at which the outage outlives the budget of a held retry: from then
    /// on, a refused probe wakes the held attempts so those it outlived are refused.
    pub(super) outlive_at: Option<Instant>,
    /// When the ratio crossed [`RetryBudget::DOWN_AT`]: first attempts that left with the burst
    /// whose answers declared the outage still go for one probe interval after it.
    pub(super) declared_at: Option<Instant>,
    /// Since when every answer has been refused, without an accept between.
    pub(super) refusing_since: Option<Instant>,
    /// Failures (a 5xx, or no answer) since the newest accepted answer; a 429 leaves the run
    /// as it is, since it speaks of a scope, not of the service.
    pub(super) failed_in_a_row: u32,
    /// When the newest answer came.
    pub(super) last_answer: Option<Instant>,
    /// The ramp an accepted probe began: releasing the held attempts, share by share.
    pub(super) ramp: Option<Ramp>,
    /// The answers to the attempts sent during the ramp.
    pub(super) ramp_counts: Counts,
    /// The ramp's draws.
    pub(super) rng: SmallRng,
}

/// The ramp after an accepted probe.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ramp {
    /// When the accepted probe began it: the ramp's identity, for the answers of its attempts.
    pub(super) from: Instant,
    /// Its step: each releases a larger share of the held attempts.
    pub(super) step: u32,
    /// When the step began.
    pub(super) step_at: Instant,
    /// Attempts it released in this step not yet answered.
    pub(super) pending: u64,
}

impl Ramp {
    pub(super) fn new(now: Instant) -> Self {
        Self {
            from: now,
            step: 0,
            step_at: now,
            pending: 0,
        }
    }
}

/// The probes sent while the service is down, and the latest one's result.
#[derive(Debug)]
pub(super) struct Probes {
    /// Probes sent so far; a probe's number is the count after it was sent.
    pub(super) sent: u64,
    /// When the newest probe went.
    pub(super) sent_at: Option<Instant>,
    /// When the next probe may go.
    pub(super) next_at: Instant,
    /// The number of the newest probe answered, whether it was accepted, and when.
    pub(super) result: Option<(u64, bool, Instant)>,
}

impl Throttle {
    pub(super) fn down(&mut self, now: Instant) -> bool {
        self.history.ratio(now) >= RetryBudget::DOWN_AT
    }

    /// Whether what the service said is too old to hold an attempt on: no answer for
    /// [`STALE_AFTER`].
    /// While the service is down, the wait between its probes is no quiet spell: evidence goes
    /// stale no sooner than the next probe is due.
    pub(super) fn stale(&self, now: Instant) -> bool {
        self.stale_at(now).is_none_or(|at| now >= at)
    }

    /// When what the service said goes stale, judged at `now`; `None` when it never answered.
    pub(super) fn stale_at(&self, now: Instant) -> Option<Instant> {
        let after = match self.down_since {
            Some(since) => STALE_AFTER.max(probe_interval(now.saturating_duration_since(since))),
            None => STALE_AFTER,
        };
        self.last_answer.map(|at| at + after)
    }

    /// When a held attempt whose hold is over (due) may go as the probe off the schedule: a
    /// third of its due window (half an `attempt`'s time) after the newest probe, so the calls
    /// whose holds end together get up to [`DUE_PROBES`] last chances, not one each.
    pub(super) fn due_probe_at(&self, attempt: Duration, now: Instant) -> Instant {
        let spacing = (attempt / 2 / DUE_PROBES).max(RetryBudget::PROBE_INTERVAL);
        self.probes.sent_at.map_or(now, |at| at + spacing)
    }

    /// How long the service has been down by `now`.
    pub(super) fn down_for(&self, now: Instant) -> Duration {
        self.down_since
            .map_or(Duration::ZERO, |since| now.saturating_duration_since(since))
    }

    /// Whether the newest probe was refused, recently enough to say the outage goes on.
    pub(super) fn newest_probe_refused(&self, now: Instant) -> bool {
        self.probes.result.is_some_and(|(_, accepted, at)| {
            !accepted && now.saturating_duration_since(at) < STALE_AFTER
        })
    }

    /// The ramp's step now, if it runs: 0 at the accepted probe, one more once a probe interval
    /// has passed since the step began *and* every attempt the step released was answered. A
    /// client learns from its own answers before it releases more, so a client with few calls
    /// and slow answers ramps no faster than its answers come back.
    pub(super) fn ramp_step(&mut self, now: Instant) -> Option<u32> {
        let ramp = self.ramp.as_mut()?;
        if ramp.pending == 0
            && now.saturating_duration_since(ramp.step_at) >= RetryBudget::PROBE_INTERVAL
        {
            ramp.step += 1;
            ramp.step_at = now;
        }
        Some(ramp.step)
    }

    /// An attempt the ramp that began at `from` released was answered or dropped: whether that
    /// was the last of its step, which may let the next step begin.
    pub(super) fn ramp_answered(&mut self, from: Instant) -> bool {
        match self.ramp.as_mut() {
            Some(ramp) if ramp.from == from && ramp.pending > 0 => {
                ramp.pending -= 1;
                ramp.pending == 0
            }
            _ => false,
        }
    }

    /// The ramp released everyone: the service is up, and the outage's history is forgotten, so
    /// the calls after it are not held by answers from before the heal.
    pub(super) fn declare_up(&mut self, now: Instant) {
        self.history = History::new(now);
        self.down_since = None;
        self.outlive_at = None;
        self.declared_at = None;
        self.ramp = None;
    }

    /// Counts an answer (`accepted` or not) that came at `now`; `failed` when it was a 5xx or
    /// none came.
    pub(super) fn record(&mut self, now: Instant, accepted: bool, failed: bool) {
        self.history.record(now, accepted);
        self.last_answer = Some(now);
        self.refusing_since = match (accepted, self.refusing_since) {
            (true, _) => None,
            (false, Some(since)) => Some(since),
            (false, None) => Some(now),
        };
        if accepted {
            self.failed_in_a_row = 0;
        } else if failed {
            self.failed_in_a_row = self.failed_in_a_row.saturating_add(1);
        }
    }
}

/// The wait before the next probe, once the service has been down for `down_for`:
/// [`RetryBudget::PROBE_AGE_SHARE`] of that, within the probe interval's bounds.
pub(super) fn probe_interval(down_for: Duration) -> Duration {
    down_for
        .mul_f64(RetryBudget::PROBE_AGE_SHARE)
        .clamp(RetryBudget::PROBE_INTERVAL, RetryBudget::PROBE_INTERVAL_MAX)
}

/// The last chances of the held attempts whose holds end together: probes a due window may
/// send off the schedule.
const DUE_PROBES: u32 = 3;
