//! `backon` 1.6.0's `ExponentialBuilder::default()` (`src/backoff/exponential.rs`,
//! `ExponentialBuilder::new`): `min_delay` 1 s, `factor` 2, `max_delay` 60 s, `max_times` 3,
//! `jitter` false. So waits of 1, 2 and 4 s, the same for every sender: no jitter. `Retryable`
//! retries every error unless `.when` says otherwise, and `Retry-After` only through an
//! `.adjust` the user writes: neither is used here. Attempts use the scenario's timeout.

use std::time::Duration;

use super::{Next, Peer, Seen};
use crate::rng::Rng;

/// backon's defaults around each send.
#[derive(Debug, Default)]
pub(crate) struct BackonDefault;

impl BackonDefault {
    /// `max_times`.
    pub(crate) const MAX_TIMES: u32 = 3;
    /// `min_delay`, seconds.
    pub(crate) const MIN_DELAY: f64 = 1.0;
    /// `max_delay`, seconds.
    pub(crate) const MAX_DELAY: f64 = 60.0;
}

impl Peer for BackonDefault {
    fn attempt_timeout(&self, scenario_timeout: Duration) -> Duration {
        scenario_timeout
    }

    fn next(&self, attempt: u32, seen: Seen, _now: f64, _rng: &mut Rng) -> Next {
        if seen == Seen::Delivered {
            return Next::Done;
        }
        let past = attempt - 1;
        if past >= Self::MAX_TIMES {
            return Next::GiveUp;
        }
        let delay = (Self::MIN_DELAY * 2f64.powi(past as i32)).min(Self::MAX_DELAY);
        Next::Retry(Duration::from_secs_f64(delay))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_one_two_four_seconds_without_jitter() {
        let mut rng = Rng::derive(0, 0);
        let waits: Vec<Next> = (1..=4)
            .map(|a| BackonDefault.next(a, Seen::Timeout, 0.0, &mut rng))
            .collect();
        assert_eq!(
            waits,
            [
                Next::Retry(Duration::from_secs(1)),
                Next::Retry(Duration::from_secs(2)),
                Next::Retry(Duration::from_secs(4)),
                Next::GiveUp
            ]
        );
    }
}
