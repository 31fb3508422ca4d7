//! The one runtime: every time the SDK reads, and every wait it sleeps, goes through here.
//!
//! [`now`] and [`wall_now`] read tokio's clock, [`sleep`], [`sleep_until`] and [`timeout`] wait
//! on tokio's timer. Nothing else in `src/` reads `Instant::now`, `SystemTime::now` or calls
//! tokio's time functions (`tests/layout.rs` checks it), so `tokio::time::pause()` runs whole
//! calls, waits included, in virtual time, and the fleet simulator runs the real engine in the
//! virtual time of its own runtime (smithy-rs injects a `TimeSource` and an `AsyncSleep` for the
//! same reason; tokio's paused clock gives it here without a parameter on every call).
//!
//! [`Clock`] is the one public clock type: where a caller injects time by hand (a retry
//! budget's, an outbox's), it hands a [`Clock`]; [`TokioClock`] is the runtime's own and the
//! default, [`ManualClock`] moves only when told to.

use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

/// Now, on the runtime's clock (under `tokio::time::pause()`, the virtual time).
pub(crate) fn now() -> Instant {
    Instant::now()
}

/// The wall-clock time now, read on the runtime's clock: the system time when first asked,
/// moved on by tokio's instants since. Under paused time it moves with the virtual clock, so a
/// `Retry-After` HTTP date is waited out in virtual time too.
pub(crate) fn wall_now() -> SystemTime {
    wall_at(now())
}

/// The wall-clock time at `now`, an instant of the runtime's clock (see [`wall_now`]): one
/// clock read serves both.
pub(crate) fn wall_at(now: Instant) -> SystemTime {
    WallAnchor::get(now).wall_at(now)
}

/// An instant of the runtime's clock and the wall-clock time then: the wall clock at any other
/// instant, counted from it when it is asked for (see [`wall_now`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct WallAnchor {
    pub(crate) at: Instant,
    pub(crate) wall: SystemTime,
}

impl WallAnchor {
    /// The runtime's anchor, taken when first asked (at `now`).
    pub(crate) fn get(now: Instant) -> Self {
        static ANCHOR: OnceLock<WallAnchor> = OnceLock::new();
        *ANCHOR.get_or_init(|| WallAnchor {
            at: now,
            wall: SystemTime::now(),
        })
    }

    /// The wall-clock time at `now`.
    pub(crate) fn wall_at(self, now: Instant) -> SystemTime {
        match now.checked_duration_since(self.at) {
            Some(since) => self.wall.checked_add(since).unwrap_or(self.wall),
            None => self.wall.checked_sub(self.at - now).unwrap_or(self.wall),
        }
    }
}

/// Waits `wait`.
pub(crate) async fn sleep(wait: Duration) {
    tokio::time::sleep(wait).await;
}

/// Waits until `until`.
pub(crate) async fn sleep_until(until: Instant) {
    tokio::time::sleep_until(until).await;
}

/// Runs `future` for at most `limit`: an error when it did not finish in time.
///
/// Tokio's own future, not an `async fn` around it: that would hold `future` twice, once as
/// its argument and once inside the timeout it awaits, and an attempt's send is the largest
/// thing a call holds while it is in flight.
pub(crate) fn timeout<F: Future>(limit: Duration, future: F) -> tokio::time::Timeout<F> {
    tokio::time::timeout(limit, future)
}

/// Tells the time. Inject your own to test a schedule or an outbox without waiting.
///
/// [`now`](Self::now) is the instant waits and intervals are measured on;
/// [`wall`](Self::wall) is the wall-clock time stored times and HTTP dates are read against.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use hodoflow_retry::clock::{Clock, ManualClock};
///
/// let clock = ManualClock::new(SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000));
/// let (before, wall) = (clock.now(), clock.wall());
/// clock.advance(Duration::from_secs(60));
/// assert_eq!(clock.now() - before, Duration::from_secs(60));
/// assert_eq!(clock.wall().duration_since(wall).unwrap(), Duration::from_secs(60));
/// ```
pub trait Clock: Send + Sync + fmt::Debug {
    /// The current instant.
    fn now(&self) -> Instant;

    /// The current wall-clock time.
    fn wall(&self) -> SystemTime;

    /// Whether the clock moves by itself, as time passes: an idle outbox worker may then sleep
    /// until its next job is due. A clock that moves only when told to (a test's) returns
    /// `false`, and idle workers look again at every poll instead.
    fn moves_by_itself(&self) -> bool {
        true
    }
}

/// The runtime's clock: tokio's, the real time, or a test's when tokio's time is paused. The
/// default everywhere a clock is taken.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioClock;

impl Clock for TokioClock {
    fn now(&self) -> Instant {
        now()
    }

    fn wall(&self) -> SystemTime {
        wall_now()
    }
}

/// A clock that moves only when told to, by [`advance`](Self::advance): both its instant and
/// its wall-clock time move together.
#[derive(Debug, Clone)]
pub struct ManualClock {
    start: Instant,
    wall: SystemTime,
    moved: Arc<Mutex<Duration>>,
}

impl ManualClock {
    /// A clock whose wall-clock time is `wall` now.
    pub fn new(wall: SystemTime) -> Self {
        Self {
            start: now(),
            wall,
            moved: Arc::new(Mutex::new(Duration::ZERO)),
        }
    }

    /// Moves the clock on by `by`.
    pub fn advance(&self, by: Duration) {
        let mut moved = self.moved.lock().unwrap_or_else(PoisonError::into_inner);
        *moved = moved.saturating_add(by);
    }

    fn moved(&self) -> Duration {
        *self.moved.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        let moved = self.moved();
        self.start.checked_add(moved).unwrap_or(self.start)
    }

    fn wall(&self) -> SystemTime {
        self.wall.checked_add(self.moved()).unwrap_or(self.wall)
    }

    /// Moved only by [`advance`](ManualClock::advance).
    fn moves_by_itself(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_wall_clock_moves_with_paused_time() {
        let before = wall_now();
        sleep(Duration::from_secs(3600)).await;
        let after = wall_now();
        let moved = after.duration_since(before).unwrap();
        assert!(moved >= Duration::from_secs(3600), "{moved:?}");
        assert!(moved < Duration::from_secs(3601), "{moved:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_manual_clock_moves_only_when_told() {
        let clock = ManualClock::new(SystemTime::UNIX_EPOCH);
        let at = clock.now();
        sleep(Duration::from_secs(5)).await;
        assert_eq!(clock.now(), at);
        assert_eq!(clock.wall(), SystemTime::UNIX_EPOCH);
        clock.advance(Duration::from_secs(2));
        assert_eq!(clock.now() - at, Duration::from_secs(2));
        assert!(!clock.moves_by_itself());
        assert!(TokioClock.moves_by_itself());
    }
}
