//! How long to wait before the next attempt.
//!
//! Exponential backoff with *full* jitter: the wait before retry `n` is uniform in
//! `[0, min(cap, base * 2^n)]`. Full jitter spreads many workers that failed together across the
//! whole window, so they do not come back together (Hodoflow's "Idempotency and retries": "add
//! jitter so many workers do not retry together").
//!
//! When the server names a wait in `Retry-After`, it is never undercut: the SDK waits that long
//! plus a small positive jitter (at most 10% of it, at most one second), so workers that got the
//! same `Retry-After` do not return in the same instant.
//!
//! A 429 without a usable `Retry-After` (absent, or a value that is neither delay-seconds nor an
//! HTTP-date) is not retried on the short exponential schedule: a rate limit does not clear in
//! 300 ms, and a quick retry only spends the credential's budget. It waits
//! [`Backoff::DEFAULT_RETRY_AFTER_FALLBACK`], 2 s, the default the retry loop of Modulify's
//! "Idempotency and retries" gives a missing `Retry-After`, with the same jitter, or the backoff
//! when that is longer.
//!
//! A custom [`Schedule`](crate::schedule::Schedule) may replace the exponential waits; the `Retry-After`
//! floor and the fallback above apply to its waits the same way.

use std::time::Duration;

use rand::Rng;

use crate::core::attempt::WaitReason;
use crate::core::matrix::Verdict;

/// The most jitter added to a `Retry-After` wait.
const RETRY_AFTER_JITTER_MAX: Duration = Duration::from_secs(1);

/// Exponential backoff with full jitter.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use hodoflow_retry::Backoff;
///
/// let backoff = Backoff::new()
///     .base(Duration::from_millis(200))
///     .cap(Duration::from_secs(10));
/// assert_eq!(backoff.ceiling(0), Duration::from_millis(200));
/// assert_eq!(backoff.ceiling(3), Duration::from_millis(1600));
/// assert_eq!(backoff.ceiling(10), Duration::from_secs(10));
///
/// let wait = backoff.delay(3, &mut rand::rng());
/// assert!(wait <= Duration::from_millis(1600));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[must_use]
pub struct Backoff {
    base: Duration,
    cap: Duration,
    retry_after_fallback: Duration,
}

impl Backoff {
    /// The default base: 500 ms.
    pub const DEFAULT_BASE: Duration = Duration::from_millis(500);
    /// The default cap: 30 s.
    pub const DEFAULT_CAP: Duration = Duration::from_secs(30);
    /// The default least wait after a 429 without a usable `Retry-After`: 2 s, the
    /// `Number(response.headers.get('Retry-After') || 2)` of Modulify's "Idempotency and
    /// retries".
    pub const DEFAULT_RETRY_AFTER_FALLBACK: Duration = Duration::from_secs(2);

    /// The default policy: base 500 ms, doubling to a 30 s cap; 2 s after a 429 without a usable
    /// `Retry-After`.
    pub const fn new() -> Self {
        Self {
            base: Self::DEFAULT_BASE,
            cap: Self::DEFAULT_CAP,
            retry_after_fallback: Self::DEFAULT_RETRY_AFTER_FALLBACK,
        }
    }

    /// Sets the ceiling of the first retry's wait; it doubles on each further retry.
    ///
    /// Default: 500 ms. Zero turns backoff off (retries follow at once), which suits tests only.
    pub const fn base(mut self, base: Duration) -> Self {
        self.base = base;
        self
    }

    /// Sets the largest ceiling a wait can have.
    ///
    /// Default: 30 s.
    pub const fn cap(mut self, cap: Duration) -> Self {
        self.cap = cap;
        self
    }

    /// Sets the least wait after an answer that asks for `Retry-After` (a 429, or a key in
    /// progress being waited for) but carries none that can be read. The wait is this plus the
    /// jitter of a `Retry-After`, or the backoff when that is longer.
    ///
    /// Default: 2 s ([`Backoff::DEFAULT_RETRY_AFTER_FALLBACK`]).
    pub const fn retry_after_fallback(mut self, wait: Duration) -> Self {
        self.retry_after_fallback = wait;
        self
    }

    /// The upper bound of the wait before retry `retry` (0 for the first retry):
    /// `min(cap, base * 2^retry)`, saturating, so any `retry` is safe.
    pub fn ceiling(&self, retry: u32) -> Duration {
        if self.base.is_zero() {
            return Duration::ZERO;
        }
        let grown = 1u32
            .checked_shl(retry)
            .and_then(|factor| self.base.checked_mul(factor))
            .unwrap_or(Duration::MAX);
        grown.min(self.cap)
    }

    /// A wait before retry `retry` (0 for the first retry): uniform in `[0, ceiling(retry)]`.
    ///
    /// Ceilings beyond `u64::MAX` nanoseconds (584 years) are treated as that.
    pub fn delay<R: Rng + ?Sized>(&self, retry: u32, rng: &mut R) -> Duration {
        uniform_up_to(self.ceiling(retry), rng)
    }

    /// The wait a retrying `verdict` asks for before retry `retry` (0 for the first retry), and
    /// why; `None` when the verdict does not retry.
    ///
    /// `retry_after` is the server's `Retry-After`, already parsed. When present it is honoured
    /// (plus jitter, see [`retry_after_wait`]): as the wait itself for
    /// [`Verdict::RetryAfterServerWait`], as a floor under the backoff for
    /// [`Verdict::RetryAfterBackoff`]. When absent, [`Verdict::RetryAfterBackoff`] backs off and
    /// [`Verdict::RetryAfterServerWait`] waits the fallback (plus jitter) or the backoff, the
    /// longer.
    pub(crate) fn wait<R: Rng + ?Sized>(
        &self,
        verdict: Verdict,
        retry: u32,
        retry_after: Option<Duration>,
        rng: &mut R,
    ) -> Option<(Duration, WaitReason)> {
        self.wait_with(verdict, retry_after, |rng| self.delay(retry, rng), rng)
    }

    /// As [`wait`](Self::wait), with the backoff part from `backoff` instead of
    /// [`delay`](Self::delay), called only for a verdict that uses it: how a custom
    /// [`Schedule`](crate::schedule::Schedule)'s wait gets the same `Retry-After` floor and fallback.
    pub(crate) fn wait_with<R: Rng + ?Sized>(
        &self,
        verdict: Verdict,
        retry_after: Option<Duration>,
        backoff: impl FnOnce(&mut R) -> Duration,
        rng: &mut R,
    ) -> Option<(Duration, WaitReason)> {
        let server_wait = retry_after.map(|wait| retry_after_wait(wait, rng));
        match verdict {
            Verdict::RetryAfterServerWait => Some(match server_wait {
                Some(wait) => (wait, WaitReason::RetryAfter),
                None => {
                    let fallback = retry_after_wait(self.retry_after_fallback, rng);
                    let backoff = backoff(rng);
                    if fallback >= backoff {
                        (fallback, WaitReason::RetryAfterFallback)
                    } else {
                        (backoff, WaitReason::Backoff)
                    }
                }
            }),
            Verdict::RetryAfterBackoff => {
                let backoff = backoff(rng);
                Some(match server_wait {
                    Some(wait) if wait >= backoff => (wait, WaitReason::RetryAfter),
                    _ => (backoff, WaitReason::Backoff),
                })
            }
            Verdict::ReexchangeOnce => Some((Duration::ZERO, WaitReason::Reexchange)),
            Verdict::Success | Verdict::Stop(_) => None,
        }
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Self::new()
    }
}

/// The wait for a server's `Retry-After`: `server_wait` plus a uniform jitter in
/// `[0, min(server_wait / 10, 1 s)]`. Never shorter than `server_wait`.
pub(crate) fn retry_after_wait<R: Rng + ?Sized>(server_wait: Duration, rng: &mut R) -> Duration {
    let jitter = uniform_up_to((server_wait / 10).min(RETRY_AFTER_JITTER_MAX), rng);
    server_wait.saturating_add(jitter)
}

/// A uniform sample in `[0, ceiling]`, at nanosecond resolution.
fn uniform_up_to<R: Rng + ?Sized>(ceiling: Duration, rng: &mut R) -> Duration {
    let nanos = u64::try_from(ceiling.as_nanos()).unwrap_or(u64::MAX);
    Duration::from_nanos(rng.random_range(0..=nanos))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::error::ErrorKind;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    const SAMPLES: usize = 10_000;

    fn rng() -> StdRng {
        StdRng::seed_from_u64(0x5eed)
    }

    #[test]
    fn defaults_are_500_ms_doubling_to_30_s() {
        let backoff = Backoff::default();
        assert_eq!(backoff, Backoff::new());
        assert_eq!(backoff.ceiling(0), Duration::from_millis(500));
        assert_eq!(backoff.ceiling(1), Duration::from_secs(1));
        assert_eq!(backoff.ceiling(5), Duration::from_secs(16));
        assert_eq!(backoff.ceiling(6), Duration::from_secs(30));
    }

    #[test]
    fn ceiling_saturates_without_overflow() {
        let backoff = Backoff::new().cap(Duration::MAX);
        assert_eq!(backoff.ceiling(31), Duration::from_millis(500) * (1 << 31));
        assert_eq!(backoff.ceiling(32), Duration::MAX);
        assert_eq!(backoff.ceiling(1000), Duration::MAX);
        assert_eq!(Backoff::new().ceiling(u32::MAX), Duration::from_secs(30));
        assert_eq!(
            Backoff::new().base(Duration::ZERO).ceiling(1000),
            Duration::ZERO
        );
    }

    #[test]
    fn full_jitter_stays_within_zero_and_the_ceiling() {
        let backoff = Backoff::new();
        let mut rng = rng();
        for retry in 0..8 {
            let ceiling = backoff.ceiling(retry);
            let waits: Vec<_> = (0..SAMPLES)
                .map(|_| backoff.delay(retry, &mut rng))
                .collect();
            assert!(waits.iter().all(|wait| *wait <= ceiling), "retry {retry}");
            // Full jitter uses the whole window, not just its top.
            assert!(
                waits.iter().any(|wait| *wait < ceiling / 10),
                "retry {retry}"
            );
            assert!(
                waits.iter().any(|wait| *wait > ceiling * 9 / 10),
                "retry {retry}"
            );
        }
    }

    #[test]
    fn full_jitter_reaches_the_cap_and_no_further() {
        let backoff = Backoff::new().cap(Duration::from_secs(2));
        let mut rng = rng();
        let waits: Vec<_> = (0..SAMPLES)
            .map(|_| backoff.delay(1000, &mut rng))
            .collect();
        assert!(waits.iter().all(|wait| *wait <= Duration::from_secs(2)));
        assert!(waits.iter().any(|wait| *wait > Duration::from_millis(1900)));
    }

    #[test]
    fn waits_retry_after_never_earlier_and_jitters_at_most_10_percent() {
        let mut rng = rng();
        for seconds in [0, 1, 3, 7] {
            let server = Duration::from_secs(seconds);
            for _ in 0..SAMPLES {
                let wait = retry_after_wait(server, &mut rng);
                assert!(wait >= server);
                assert!(wait - server <= server / 10);
            }
        }
    }

    #[test]
    fn retry_after_jitter_is_at_most_one_second() {
        let mut rng = rng();
        let server = Duration::from_secs(120);
        let waits: Vec<_> = (0..SAMPLES)
            .map(|_| retry_after_wait(server, &mut rng))
            .collect();
        assert!(waits.iter().all(|wait| *wait >= server));
        assert!(
            waits
                .iter()
                .all(|wait| *wait - server <= Duration::from_secs(1))
        );
        assert!(
            waits
                .iter()
                .any(|wait| *wait - server > Duration::from_millis(900))
        );
        assert_eq!(
            retry_after_wait(Duration::MAX, &mut rng),
            Duration::MAX,
            "saturates"
        );
    }

    #[test]
    fn rate_limits_wait_retry_after_or_back_off_without_it() {
        let backoff = Backoff::new();
        let mut rng = rng();
        let server = Duration::from_secs(20);

        let (wait, reason) = backoff
            .wait(Verdict::RetryAfterServerWait, 0, Some(server), &mut rng)
            .expect("retries");
        assert_eq!(reason, WaitReason::RetryAfter);
        assert!(wait >= server && wait <= server + Duration::from_secs(1));

        for _ in 0..SAMPLES {
            let (wait, reason) = backoff
                .wait(Verdict::RetryAfterServerWait, 0, None, &mut rng)
                .expect("retries");
            assert_eq!(reason, WaitReason::RetryAfterFallback);
            assert!(
                wait >= Duration::from_secs(2) && wait <= Duration::from_millis(2200),
                "2 s and at most a tenth of it in jitter: {wait:?}"
            );
        }
    }

    #[test]
    fn a_429_without_retry_after_waits_the_fallback_or_a_longer_backoff() {
        let backoff = Backoff::new().retry_after_fallback(Duration::from_millis(100));
        let mut rng = rng();
        let (wait, reason) = backoff
            .wait(Verdict::RetryAfterServerWait, 0, None, &mut rng)
            .expect("retries");
        assert!(wait >= Duration::from_millis(100), "{wait:?}");
        assert!(matches!(
            reason,
            WaitReason::RetryAfterFallback | WaitReason::Backoff
        ));
        // At retry 6 the ceiling is 30 s: the backoff is longer far more often than not.
        let reasons: Vec<_> = (0..SAMPLES)
            .map(|_| backoff.wait(Verdict::RetryAfterServerWait, 6, None, &mut rng))
            .map(|wait| wait.expect("retries"))
            .collect();
        assert!(
            reasons
                .iter()
                .all(|(wait, _)| *wait >= Duration::from_millis(100))
        );
        assert!(
            reasons
                .iter()
                .any(|(_, reason)| *reason == WaitReason::Backoff)
        );
        let zero = Backoff::new()
            .retry_after_fallback(Duration::ZERO)
            .base(Duration::ZERO);
        assert_eq!(
            zero.wait(Verdict::RetryAfterServerWait, 0, None, &mut rng),
            Some((Duration::ZERO, WaitReason::RetryAfterFallback)),
            "both turned off, for tests"
        );
    }

    #[test]
    fn server_errors_back_off_but_wait_at_least_retry_after() {
        let backoff = Backoff::new();
        let mut rng = rng();
        let server = Duration::from_secs(2);
        for _ in 0..1_000 {
            let (wait, reason) = backoff
                .wait(Verdict::RetryAfterBackoff, 4, Some(server), &mut rng)
                .expect("retries");
            assert!(wait >= server);
            match reason {
                WaitReason::RetryAfter => assert!(wait <= server + server / 10),
                WaitReason::Backoff => assert!(wait <= backoff.ceiling(4)),
                other => panic!("unexpected reason {other:?}"),
            }
        }
    }

    #[test]
    fn reexchange_does_not_wait_and_stops_do_not_retry() {
        let backoff = Backoff::new();
        let mut rng = rng();
        assert_eq!(
            backoff.wait(
                Verdict::ReexchangeOnce,
                0,
                Some(Duration::from_secs(9)),
                &mut rng
            ),
            Some((Duration::ZERO, WaitReason::Reexchange))
        );
        assert_eq!(backoff.wait(Verdict::Success, 0, None, &mut rng), None);
        let stop = Verdict::Stop(ErrorKind::Forbidden);
        assert_eq!(backoff.wait(stop, 0, None, &mut rng), None);
    }
}
