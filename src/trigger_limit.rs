//! Client-side pacing of webhook deliveries, per trigger.
//!
//! Document 001: a trigger accepts 100 requests per 60-second window by default and answers
//! 429 past that. A sender with a burst of 300 events for one trigger would send 300, bounce
//! 200 off 429s, and retry them all after `Retry-After`. The limiter lets at most `requests`
//! attempts per trigger be "in the window" at once instead, so the burst waits on the client.
//!
//! Each trigger has a semaphore of `requests` permits. An attempt holds one from before it is
//! sent until `per` after its answer (or its failure) came back. Any two attempts that share a
//! permit therefore arrive at the server at least `per` apart, whatever the network's delay,
//! so no window of `per` — fixed at any alignment, or sliding — ever holds more than
//! `requests` arrivals. Waiters are served in order (tokio's semaphore is fair), and a call whose
//! wait would outlast its budget stops with `budget_exhausted`.
//!
//! Why not `governor`? Its GCRA counts send times: with a burst of `requests` it lets up to
//! twice that into one window, and paced one at a time it admits exactly `requests` by send
//! time, so the network's jitter can still put one more into a window at the server. It cannot
//! reserve a slot, so a call cannot learn whether its wait fits its budget. And its async waits
//! use `futures-timer`, which tokio's paused test clock does not drive.

use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::{Error, Result};

/// How many deliveries one trigger accepts per window.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use hodoflow_retry::TriggerLimit;
///
/// assert_eq!(TriggerLimit::DOCUMENTED.requests(), 100);
/// let tighter = TriggerLimit::new(20, Duration::from_secs(60))?;
/// # let _ = tighter;
/// # Ok::<(), hodoflow_retry::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TriggerLimit {
    requests: u32,
    per: Duration,
}

impl TriggerLimit {
    /// Document 001's default: 100 requests per trigger per 60-second window.
    pub const DOCUMENTED: Self = Self {
        requests: 100,
        per: Duration::from_secs(60),
    };

    /// `requests` per window of `per`.
    ///
    /// # Errors
    ///
    /// `invalid_input` when `requests` or `per` is zero, or `requests` is above tokio's
    /// semaphore limit (about 2 billion).
    pub fn new(requests: u32, per: Duration) -> Result<Self> {
        if requests == 0 || per.is_zero() || requests as usize > Semaphore::MAX_PERMITS {
            return Err(Error::invalid_input(
                "a trigger limit needs at least one request per positive window",
            ));
        }
        Ok(Self { requests, per })
    }

    /// The requests allowed per window.
    pub fn requests(&self) -> u32 {
        self.requests
    }

    /// The window.
    pub fn per(&self) -> Duration {
        self.per
    }
}

/// A trigger, by a hash of its token: the token itself is never kept here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct TriggerKey(u64);

impl TriggerKey {
    /// The key of the trigger with `token`.
    pub(crate) fn of(token: &str) -> Self {
        let mut hasher = DefaultHasher::new();
        token.hash(&mut hasher);
        Self(hasher.finish())
    }
}

/// The triggers seen with a limit; idle ones are forgotten past this many.
const KEEP_IDLE_TRIGGERS: usize = 1024;

/// Paces the deliveries of one client, trigger by trigger.
#[derive(Debug, Default)]
pub(crate) struct TriggerLimiter {
    every: Option<TriggerLimit>,
    overrides: HashMap<TriggerKey, TriggerLimit>,
    lanes: Mutex<HashMap<TriggerKey, Lane>>,
}

#[derive(Debug)]
struct Lane {
    limit: TriggerLimit,
    permits: Arc<Semaphore>,
}

/// A slot of a trigger's window, held from before an attempt until `per` after its answer.
#[derive(Debug)]
pub(crate) struct Slot {
    permit: OwnedSemaphorePermit,
    per: Duration,
}

impl Slot {
    /// The attempt's answer (or failure) is in: the slot frees `per` from now.
    pub(crate) fn release_after_window(self) {
        let Self { permit, per } = self;
        tokio::spawn(async move {
            tokio::time::sleep(per).await;
            drop(permit);
        });
    }
}

impl TriggerLimiter {
    /// `every` for each trigger without an entry in `overrides`; no pacing when both are empty.
    pub(crate) fn new(
        every: Option<TriggerLimit>,
        overrides: HashMap<TriggerKey, TriggerLimit>,
    ) -> Self {
        Self {
            every,
            overrides,
            lanes: Mutex::new(HashMap::new()),
        }
    }

    /// Waits for a slot of `trigger`'s window, at most `max_wait`. `Ok(None)` when the trigger
    /// is not paced; `Err(())` when no slot freed in time. The wait is returned with the slot.
    pub(crate) async fn acquire(
        &self,
        trigger: TriggerKey,
        max_wait: Duration,
    ) -> Result<Option<(Slot, Duration)>, ()> {
        let Some((permits, per)) = self.lane(trigger) else {
            return Ok(None);
        };
        if let Ok(permit) = Arc::clone(&permits).try_acquire_owned() {
            return Ok(Some((Slot { permit, per }, Duration::ZERO)));
        }
        let started = tokio::time::Instant::now();
        match tokio::time::timeout(max_wait, permits.acquire_owned()).await {
            Ok(Ok(permit)) => Ok(Some((Slot { permit, per }, started.elapsed()))),
            // The semaphore is never closed; a timeout means the window stayed full.
            Ok(Err(_)) | Err(_) => Err(()),
        }
    }

    fn lane(&self, trigger: TriggerKey) -> Option<(Arc<Semaphore>, Duration)> {
        let limit = self.overrides.get(&trigger).or(self.every.as_ref())?;
        let mut lanes = self
            .lanes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !lanes.contains_key(&trigger) && lanes.len() >= KEEP_IDLE_TRIGGERS {
            lanes.retain(|_, lane| !lane.is_idle());
        }
        let lane = lanes.entry(trigger).or_insert_with(|| Lane {
            limit: *limit,
            permits: Arc::new(Semaphore::new(limit.requests as usize)),
        });
        Some((Arc::clone(&lane.permits), lane.limit.per))
    }
}

impl Lane {
    /// No slot is held and nobody waits.
    fn is_idle(&self) -> bool {
        Arc::strong_count(&self.permits) == 1
            && self.permits.available_permits() == self.limit.requests as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    fn limiter(requests: u32, per: Duration) -> TriggerLimiter {
        TriggerLimiter::new(
            Some(TriggerLimit::new(requests, per).unwrap()),
            HashMap::new(),
        )
    }

    #[test]
    fn refuses_an_empty_limit() {
        assert!(TriggerLimit::new(0, SECOND).is_err());
        assert!(TriggerLimit::new(1, Duration::ZERO).is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn an_unpaced_trigger_never_waits() {
        let limiter = TriggerLimiter::default();
        let slot = limiter
            .acquire(TriggerKey::of("t"), Duration::ZERO)
            .await
            .unwrap();
        assert!(slot.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_slot_frees_one_window_after_its_answer() {
        let limiter = limiter(2, 10 * SECOND);
        let trigger = TriggerKey::of("t");
        let start = tokio::time::Instant::now();
        let (first, wait) = limiter.acquire(trigger, SECOND).await.unwrap().unwrap();
        assert_eq!(wait, Duration::ZERO);
        let (second, _) = limiter.acquire(trigger, SECOND).await.unwrap().unwrap();
        assert!(
            limiter.acquire(trigger, SECOND).await.is_err(),
            "a third within the window does not fit a 1 s wait"
        );
        tokio::time::sleep(3 * SECOND).await;
        first.release_after_window();
        second.release_after_window();
        let (_, waited) = limiter
            .acquire(trigger, 60 * SECOND)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            start.elapsed(),
            SECOND + 3 * SECOND + 10 * SECOND,
            "the 1 s refused wait, the 3 s answer, then the 10 s window"
        );
        assert_eq!(waited, 10 * SECOND);
    }

    #[tokio::test(start_paused = true)]
    async fn triggers_are_paced_apart_and_overrides_win() {
        let slow = TriggerKey::of("slow");
        let limiter = TriggerLimiter::new(
            Some(TriggerLimit::new(1, SECOND).unwrap()),
            HashMap::from([(slow, TriggerLimit::new(3, SECOND).unwrap())]),
        );
        let (a, _) = limiter
            .acquire(TriggerKey::of("a"), Duration::ZERO)
            .await
            .unwrap()
            .unwrap();
        assert!(
            limiter
                .acquire(TriggerKey::of("a"), Duration::ZERO)
                .await
                .is_err()
        );
        assert!(
            limiter
                .acquire(TriggerKey::of("b"), Duration::ZERO)
                .await
                .is_ok_and(|slot| slot.is_some()),
            "another trigger has its own window"
        );
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(limiter.acquire(slow, Duration::ZERO).await.unwrap());
        }
        assert!(limiter.acquire(slow, Duration::ZERO).await.is_err());
        drop((a, held));
    }

    #[tokio::test(start_paused = true)]
    async fn waiters_are_served_in_order() {
        let limiter = Arc::new(limiter(1, SECOND));
        let trigger = TriggerKey::of("t");
        let (held, _) = limiter
            .acquire(trigger, Duration::ZERO)
            .await
            .unwrap()
            .unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for n in 0..5 {
            let (limiter, order) = (Arc::clone(&limiter), Arc::clone(&order));
            tasks.push(tokio::spawn(async move {
                let (slot, _) = limiter
                    .acquire(trigger, 60 * SECOND)
                    .await
                    .unwrap()
                    .unwrap();
                order.lock().unwrap().push(n);
                slot.release_after_window();
            }));
            tokio::task::yield_now().await;
        }
        held.release_after_window();
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3, 4]);
    }
}
