//! The OSDI'22 artifact's client (Huang et al., "Metastable Failures in the Wild", artifact
//! `Retry_Metastability`), as the issue describes it: open loop, a 3 s timeout and up to 4
//! immediate resends. It has no backoff, no jitter and no budget: the naive client whose retries
//! are the sustaining effect. A shed answer (503 or 429, only when a scenario sheds) is resent at
//! once too, as a timeout is.

use std::time::Duration;

use super::{Next, Peer, Seen};
use crate::rng::Rng;

/// The artifact's client.
#[derive(Debug, Default)]
pub(crate) struct Osdi22Client;

impl Osdi22Client {
    /// Resends after the first attempt.
    pub(crate) const RESENDS: u32 = 4;
    /// The artifact's timeout.
    pub(crate) const TIMEOUT: Duration = Duration::from_secs(3);
}

impl Peer for Osdi22Client {
    fn attempt_timeout(&self, _scenario_timeout: Duration) -> Duration {
        Self::TIMEOUT
    }

    fn next(&self, attempt: u32, seen: Seen, _now: f64, _rng: &mut Rng) -> Next {
        match seen {
            Seen::Delivered => Next::Done,
            _ if attempt <= Self::RESENDS => Next::Retry(Duration::ZERO),
            _ => Next::GiveUp,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resends_at_once_four_times_then_gives_up() {
        let mut rng = Rng::derive(0, 0);
        let client = Osdi22Client;
        for attempt in 1..=4 {
            assert_eq!(
                client.next(attempt, Seen::Timeout, 0.0, &mut rng),
                Next::Retry(Duration::ZERO)
            );
        }
        assert_eq!(client.next(5, Seen::Timeout, 0.0, &mut rng), Next::GiveUp);
    }
}
