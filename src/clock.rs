//! The time source of the retry budget's refill, injectable so tests never sleep.

use std::fmt;

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
