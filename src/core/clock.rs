//! One clock: every time the SDK reads goes through tokio's, here ([`now`], [`wall_now`]), so
//! `tokio::time::pause()` runs whole calls, waits included, in virtual time, and the outbox's
//! `SystemClock` reads the same wall clock. [`Clock`] injects it where a test steps time by
//! hand (the retry budget); [`wall_now`] is the wall-clock time that HTTP dates (`Retry-After`,
//! `RateLimit-Reset` as a date) are read against, on the same clock.

use std::fmt;
use std::sync::OnceLock;
use std::time::SystemTime;

use tokio::time::Instant;

/// Tells the time. Inject your own to test a schedule without sleeping.
///
/// # Examples
///
/// ```
/// use std::sync::Mutex;
/// use std::time::Duration;
/// use hodoflow_retry::Clock;
/// use tokio::time::Instant;
///
/// #[derive(Debug)]
/// struct Manual(Mutex<Instant>);
///
/// impl Clock for Manual {
///     fn now(&self) -> Instant {
///         *self.0.lock().unwrap()
///     }
/// }
///
/// let clock = Manual(Mutex::new(Instant::now()));
/// *clock.0.lock().unwrap() += Duration::from_secs(60);
/// # let _ = clock.now();
/// ```
pub trait Clock: Send + Sync + fmt::Debug {
    /// The current instant.
    fn now(&self) -> Instant;
}

/// Tokio's clock: the real time, or the test's when tokio's time is paused.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioClock;

impl Clock for TokioClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// Now, on tokio's clock: where `core/` reads the time (under `tokio::time::pause()`, the
/// virtual time).
pub(crate) fn now() -> Instant {
    Instant::now()
}

/// The wall-clock time now, read on tokio's clock: the system time when first asked, moved on by
/// tokio's instants since. Under paused time it moves with the virtual clock, so a
/// `Retry-After` HTTP date is waited out in virtual time too.
pub(crate) fn wall_now() -> SystemTime {
    static ANCHOR: OnceLock<(Instant, SystemTime)> = OnceLock::new();
    let (at, wall) = *ANCHOR.get_or_init(|| (now(), SystemTime::now()));
    let now = now();
    match now.checked_duration_since(at) {
        Some(since) => wall.checked_add(since).unwrap_or(wall),
        None => wall.checked_sub(at - now).unwrap_or(wall),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_wall_clock_moves_with_paused_time() {
        let before = wall_now();
        tokio::time::sleep(Duration::from_secs(3600)).await;
        let after = wall_now();
        let moved = after.duration_since(before).unwrap();
        assert!(moved >= Duration::from_secs(3600), "{moved:?}");
        assert!(moved < Duration::from_secs(3601), "{moved:?}");
    }
}
