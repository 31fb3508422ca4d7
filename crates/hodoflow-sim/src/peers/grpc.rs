//! gRPC's retry policy and retry throttling, gRFC A6 ("gRPC Retry Design",
//! `grpc/proposal` `A6-client-retries.md`), with the values of its own example service config:
//! `maxAttempts` 4, `initialBackoff` 0.1 s, `maxBackoff` 1 s, `backoffMultiplier` 2,
//! `retryableStatusCodes` `UNAVAILABLE`, and `retryThrottling` `maxTokens` 10, `tokenRatio` 0.1.
//!
//! - The wait before retry `n` (1 for the first) is `random(0, min(0.1 s * 2^(n-1), 1 s))`.
//! - A `503` and a `429` are `UNAVAILABLE` (gRPC's HTTP-to-status mapping); nothing reads
//!   `Retry-After` (gRPC's pushback is its own `grpc-retry-pushback-ms`).
//! - The call's deadline covers every attempt; the scenario's timeout is the deadline here, and
//!   `DEADLINE_EXCEEDED` is not retryable: a call that times out is lost.
//! - Throttling, per channel (sender): `token_count` starts at 10; a retryable failure takes 1,
//!   a success gives 0.1; no retry while `token_count <= 5`.

use std::sync::Mutex;
use std::time::Duration;

use super::{Next, Peer, Seen};
use crate::rng::Rng;

/// A gRPC channel's retry policy and throttle.
#[derive(Debug)]
pub(crate) struct GrpcA6 {
    tokens: Mutex<f64>,
}

impl Default for GrpcA6 {
    fn default() -> Self {
        GrpcA6 {
            tokens: Mutex::new(Self::MAX_TOKENS),
        }
    }
}

impl GrpcA6 {
    /// `maxAttempts`.
    pub(crate) const MAX_ATTEMPTS: u32 = 4;
    /// `maxTokens`.
    pub(crate) const MAX_TOKENS: f64 = 10.0;
    /// `tokenRatio`.
    pub(crate) const TOKEN_RATIO: f64 = 0.1;
}

impl Peer for GrpcA6 {
    fn attempt_timeout(&self, scenario_timeout: Duration) -> Duration {
        scenario_timeout
    }

    fn deadline(&self, scenario_timeout: Duration) -> Option<Duration> {
        Some(scenario_timeout)
    }

    fn next(&self, attempt: u32, seen: Seen, _now: f64, rng: &mut Rng) -> Next {
        let mut tokens = self
            .tokens
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match seen {
            Seen::Delivered => {
                *tokens = (*tokens + Self::TOKEN_RATIO).min(Self::MAX_TOKENS);
                Next::Done
            }
            Seen::Timeout => Next::GiveUp,
            Seen::Unavailable(_) | Seen::TooMany(_) => {
                *tokens = (*tokens - 1.0).max(0.0);
                if attempt >= Self::MAX_ATTEMPTS || *tokens <= Self::MAX_TOKENS / 2.0 {
                    return Next::GiveUp;
                }
                let cap = (0.1 * 2f64.powi(attempt as i32 - 1)).min(1.0);
                Next::Retry(Duration::from_secs_f64(cap * rng.unit()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttles_retries_once_half_the_tokens_are_gone() {
        let peer = GrpcA6::default();
        let mut rng = Rng::derive(0, 0);
        let retried = (0..10)
            .filter(|_| {
                matches!(
                    peer.next(1, Seen::Unavailable(1), 0.0, &mut rng),
                    Next::Retry(_)
                )
            })
            .count();
        assert_eq!(retried, 4);
    }
}
