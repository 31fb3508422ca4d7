//! Fixed-window rate limits: per trigger for webhooks, per credential for the API.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

/// Counters of fixed windows that start at the first request of each window.
#[derive(Debug, Default)]
pub(crate) struct FixedWindows {
    windows: HashMap<String, (SystemTime, u32)>,
}

/// What is left of a window once a request was counted in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Left {
    /// Requests the window still admits.
    pub(crate) remaining: u32,
    /// Until the window ends.
    pub(crate) reset: Duration,
}

impl FixedWindows {
    /// Counts a request of `subject`; `Err(wait)` when over `limit`, with the
    /// time until the window ends.
    pub(crate) fn hit(
        &mut self,
        subject: &str,
        limit: u32,
        window: Duration,
        now: SystemTime,
    ) -> Result<Left, Duration> {
        let (start, count) = self.windows.entry(subject.to_owned()).or_insert((now, 0));
        let elapsed = now.duration_since(*start).unwrap_or_default();
        if elapsed >= window {
            *start = now;
            *count = 0;
        }
        if *count >= limit {
            let elapsed = now.duration_since(*start).unwrap_or_default();
            return Err(window.saturating_sub(elapsed));
        }
        *count += 1;
        let elapsed = now.duration_since(*start).unwrap_or_default();
        Ok(Left {
            remaining: limit - *count,
            reset: window.saturating_sub(elapsed),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_past_the_limit_until_the_window_ends() {
        let mut windows = FixedWindows::default();
        let t0 = SystemTime::UNIX_EPOCH;
        let minute = Duration::from_secs(60);
        for n in 1..=100 {
            let left = windows.hit("t", 100, minute, t0).unwrap();
            assert_eq!((left.remaining, left.reset), (100 - n, minute));
        }
        let later = t0 + Duration::from_secs(45);
        assert_eq!(
            windows.hit("t", 100, minute, later),
            Err(Duration::from_secs(15))
        );
        assert!(windows.hit("other", 100, minute, later).is_ok());
        assert_eq!(
            windows.hit("t", 100, minute, t0 + minute),
            Ok(Left {
                remaining: 99,
                reset: minute
            })
        );
    }
}
