//! `reqwest-retry` 0.9.1's `RetryTransientMiddleware` with the policy its crate docs build,
//! `ExponentialBackoff::builder().build_with_max_retries(3)` (`src/lib.rs`), over
//! `retry-policies` 0.5.2's builder defaults (`src/policies/exponential_backoff.rs`,
//! `impl Default for ExponentialBackoffBuilder`): `min_retry_interval` 1 s,
//! `max_retry_interval` 30 min, base 2, `Jitter::Full` (`src/retry_policy.rs`: the interval
//! times a uniform draw in [0, 1)). The wait before retry `n` (0 for the first) is
//! `U(0, 1) * min(30 min, 1 s * 2^n)`.
//!
//! What it retries is `default_on_request_success` / `default_on_request_failure`
//! (`reqwest-retry` 0.9.1, `src/retryable_strategy.rs`): every 5xx, 408 and 429, timeouts and
//! connect errors. It does not read `Retry-After` (no such code in 0.9.1). reqwest has no
//! default timeout, so attempts use the scenario's.

use std::time::Duration;

use super::{Next, Peer, Seen};
use crate::rng::Rng;

/// `reqwest-retry`'s documented default.
#[derive(Debug, Default)]
pub(crate) struct ReqwestRetryDefault;

impl ReqwestRetryDefault {
    /// `build_with_max_retries(3)`.
    pub(crate) const MAX_RETRIES: u32 = 3;
    /// `min_retry_interval`.
    pub(crate) const MIN: f64 = 1.0;
    /// `max_retry_interval`.
    pub(crate) const MAX: f64 = 1800.0;
}

impl Peer for ReqwestRetryDefault {
    fn attempt_timeout(&self, scenario_timeout: Duration) -> Duration {
        scenario_timeout
    }

    fn next(&self, attempt: u32, seen: Seen, _now: f64, rng: &mut Rng) -> Next {
        if seen == Seen::Delivered {
            return Next::Done;
        }
        let past = attempt - 1;
        if past >= Self::MAX_RETRIES {
            return Next::GiveUp;
        }
        let interval = (Self::MIN * 2f64.powi(past as i32)).min(Self::MAX);
        Next::Retry(Duration::from_secs_f64(interval * rng.unit()))
    }
}
