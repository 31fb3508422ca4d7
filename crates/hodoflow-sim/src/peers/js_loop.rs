//! The retry loop of Modulify's "Idempotency and retries", the JavaScript `Call` function, as
//! `crates/hodoflow-bench/src/modulify_peer.rs` transcribes it (that file quotes the loop and
//! Node's semantics):
//!
//! - at most 5 attempts (`for (let attempt = 1; attempt <= 5; attempt++)`);
//! - `429` (or `409`): wait `Number(Retry-After || 2)` seconds, then the next attempt;
//! - any other `>= 500` (a `503` included, whatever its `Retry-After`): wait `attempt * 2` s;
//! - no answer: `fetch` throws and the loop ends with the error: the event is lost. `fetch` has
//!   no overall timeout; undici gives up on headers after 300 s, the attempt timeout here.
//!
//! After the fifth failed attempt the loop waits once more and then throws; the model gives up
//! at once, which changes only when the loss is counted, not what is sent.

use std::time::Duration;

use super::{Next, Peer, Seen};
use crate::rng::Rng;

/// The document's loop.
#[derive(Debug, Default)]
pub(crate) struct JsLoop;

impl JsLoop {
    /// `attempt <= 5`.
    pub(crate) const ATTEMPTS: u32 = 5;
    /// undici's default `headersTimeout`: 300 s.
    pub(crate) const HEADERS_TIMEOUT: Duration = Duration::from_secs(300);
}

impl Peer for JsLoop {
    fn attempt_timeout(&self, _scenario_timeout: Duration) -> Duration {
        Self::HEADERS_TIMEOUT
    }

    fn next(&self, attempt: u32, seen: Seen, _now: f64, _rng: &mut Rng) -> Next {
        let wait = match seen {
            Seen::Delivered => return Next::Done,
            Seen::Timeout => return Next::GiveUp,
            Seen::TooMany(after) => Duration::from_secs(if after == 0 { 2 } else { after.into() }),
            Seen::Unavailable(_) => Duration::from_secs(2 * u64::from(attempt)),
        };
        if attempt >= Self::ATTEMPTS {
            Next::GiveUp
        } else {
            Next::Retry(wait)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_503_waits_two_seconds_per_attempt_whatever_its_retry_after() {
        let mut rng = Rng::derive(0, 0);
        assert_eq!(
            JsLoop.next(2, Seen::Unavailable(1), 0.0, &mut rng),
            Next::Retry(Duration::from_secs(4))
        );
        assert_eq!(
            JsLoop.next(1, Seen::TooMany(3), 0.0, &mut rng),
            Next::Retry(Duration::from_secs(3))
        );
        assert_eq!(JsLoop.next(1, Seen::Timeout, 0.0, &mut rng), Next::GiveUp);
    }
}
