//! The server's notion of "now", injectable so tests can step past every window.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// A source of wall-clock time for every window the server keeps: token expiry,
/// key reservations and retention, delivery buckets and retention, rate windows
/// and workflow-run progress.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// The current time.
    fn now(&self) -> SystemTime;
}

/// The real clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// A clock that stands still until a test moves it.
///
/// Clones share the same time, so a test keeps one handle and gives the other
/// to the server.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use hodoflow_mock::{Clock, ManualClock};
///
/// let clock = ManualClock::new();
/// let before = clock.now();
/// clock.advance(Duration::from_secs(7 * 24 * 3600));
/// assert_eq!(clock.now().duration_since(before).unwrap().as_secs(), 604_800);
/// ```
#[derive(Debug, Clone)]
pub struct ManualClock {
    now: Arc<Mutex<SystemTime>>,
}

impl ManualClock {
    /// A clock frozen at the current real time.
    pub fn new() -> Self {
        Self::at(SystemTime::now())
    }

    /// A clock frozen at `start`.
    pub fn at(start: SystemTime) -> Self {
        Self {
            now: Arc::new(Mutex::new(start)),
        }
    }

    /// Moves the clock forward by `step`.
    pub fn advance(&self, step: Duration) {
        let mut now = crate::lock(&self.now);
        *now += step;
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        *crate::lock(&self.now)
    }
}
