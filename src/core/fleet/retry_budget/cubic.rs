//! The send-rate limiter: AWS adaptive retry mode's CUBIC client rate limiter, engaged by a 429
//! that does not say when to come back.
//!
//! A 429 without `Retry-After` (a reverse proxy's rate limit answers so) says "slower", not "until
//! when". The limiter then paces every attempt of the client, first attempts included, at a rate
//! that starts at [`BETA`] times the rate the client was sending at, and grows back along CUBIC's
//! curve `C * (t - k)^3 + w_max`, `k = cbrt(w_max * (1 - BETA) / C)`: fast while far below the
//! rate of the last throttle, flat near it, then probing above. Each further 429 for an attempt
//! sent after the last cut cuts again; 429s for attempts sent before it were caused by the old
//! rate and do not (TCP cuts once per window, for the same reason). After [`IDLE`] without a
//! throttle, the limiter stands down.

use std::time::Duration;

use tokio::time::Instant;

/// The multiplicative decrease: AWS's 0.7.
pub(super) const BETA: f64 = 0.7;
/// CUBIC's scaling constant, in requests per second per second cubed: AWS's 0.4.
pub(super) const C: f64 = 0.4;
/// The slowest pace: one attempt every two seconds (AWS's minimum fill rate).
pub(super) const MIN_RATE: f64 = 0.5;
/// The limiter stands down after this long without a throttle.
pub(super) const IDLE: Duration = Duration::from_secs(120);

#[derive(Debug, Clone, Copy)]
struct Engaged {
    /// The rate in use at the last throttle.
    w_max: f64,
    /// When the rate was last cut.
    cut_at: Instant,
    /// The instant of the next free send slot.
    next_slot: Instant,
}

/// Paces attempts after a throttle; open until the first one.
#[derive(Debug, Default)]
pub(super) struct Limiter {
    engaged: Option<Engaged>,
}

impl Limiter {
    /// The allowed rate at `now`, in attempts per second; `None` when not engaged.
    pub(super) fn rate(&mut self, now: Instant) -> Option<f64> {
        let engaged = self.engaged?;
        let since = now.saturating_duration_since(engaged.cut_at);
        if since >= IDLE {
            self.engaged = None;
            return None;
        }
        Some(cubic(engaged.w_max, since.as_secs_f64()))
    }

    /// A 429 without `Retry-After` came back at `now` for an attempt admitted at `sent_at`,
    /// while the client answered `measured` attempts per second.
    pub(super) fn throttled(&mut self, now: Instant, sent_at: Instant, measured: f64) {
        let in_use = match (self.rate(now), self.engaged) {
            (Some(rate), Some(engaged)) => {
                if sent_at < engaged.cut_at {
                    return;
                }
                rate.min(measured.max(MIN_RATE))
            }
            _ => measured,
        };
        let w_max = in_use.max(MIN_RATE);
        let next_slot = self
            .engaged
            .map_or(now, |engaged| engaged.next_slot.max(now));
        self.engaged = Some(Engaged {
            w_max,
            cut_at: now,
            next_slot,
        });
    }

    /// How long an attempt at `now` must wait for the next send slot; zero when it may go.
    ///
    /// Slots are not reserved ahead: a waiting attempt asks again when the slot is due, at the
    /// rate of that moment, so the rate's growth along the curve speeds every waiter up. (Slots
    /// reserved ahead at the rate right after the cut put 256 calls of a pool up to minutes
    /// apart at the slowest pace, and refused every later call at once, issue 18's `blip_pool`.)
    pub(super) fn wait(&mut self, now: Instant) -> Duration {
        if self.rate(now).is_none() {
            return Duration::ZERO;
        }
        self.engaged.map_or(Duration::ZERO, |engaged| {
            engaged.next_slot.saturating_duration_since(now)
        })
    }

    /// An attempt takes the slot due at `now`: the next is one interval later, at today's rate.
    pub(super) fn take(&mut self, now: Instant) {
        let Some(rate) = self.rate(now) else {
            return;
        };
        if let Some(engaged) = &mut self.engaged {
            let interval = Duration::from_secs_f64(1.0 / rate.max(MIN_RATE));
            let at = engaged.next_slot.max(now);
            engaged.next_slot = at.checked_add(interval).unwrap_or(at);
        }
    }

    pub(super) fn is_engaged(&mut self, now: Instant) -> bool {
        self.rate(now).is_some()
    }
}

/// CUBIC's window `since` seconds after a cut from `w_max`, never below [`MIN_RATE`].
fn cubic(w_max: f64, since: f64) -> f64 {
    let k = (w_max * (1.0 - BETA) / C).cbrt();
    (C * (since - k).powi(3) + w_max).max(MIN_RATE)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn starts_at_beta_of_the_measured_rate_and_grows_back_along_the_cubic_curve() {
        let t0 = Instant::now();
        let mut limiter = Limiter::default();
        assert_eq!(limiter.rate(t0), None, "open until the first throttle");
        limiter.throttled(t0, t0, 100.0);
        let at = |s: f64| cubic(100.0, s);
        assert!((at(0.0) - 70.0).abs() < 1e-9);
        let k = (100.0f64 * 0.3 / 0.4).cbrt();
        assert!(
            (at(k) - 100.0).abs() < 1e-9,
            "back at w_max after k = {k:.2} s"
        );
        assert!(
            at(k / 2.0) > 95.0,
            "concave: most of the way back in half the time"
        );
        assert!(at(k + 2.0) > 103.0, "then probes above");
        assert!((limiter.rate(t0 + 2 * SECOND).unwrap() - at(2.0)).abs() < 1e-9);
    }

    #[test]
    fn a_throttle_for_an_attempt_sent_before_the_last_cut_does_not_cut_again() {
        let t0 = Instant::now();
        let mut limiter = Limiter::default();
        limiter.throttled(t0, t0, 100.0);
        let later = t0 + Duration::from_millis(10);
        limiter.throttled(later, t0 - Duration::from_millis(1), 100.0);
        assert!((limiter.rate(later).unwrap() - cubic(100.0, 0.01)).abs() < 1e-9);
        limiter.throttled(later, later, 100.0);
        let rate = limiter.rate(later).unwrap();
        assert!(rate < 50.0, "sent after the cut: cut again, {rate}");
    }

    #[test]
    fn paces_attempts_at_the_rate_without_reserving_ahead() {
        let t0 = Instant::now();
        let mut limiter = Limiter::default();
        assert_eq!(limiter.wait(t0), Duration::ZERO, "open before a throttle");
        limiter.throttled(t0, t0, 1.0);
        // w_max is 1/s: about 0.7/s right after the cut, about 1.43 s apart.
        assert_eq!(limiter.wait(t0), Duration::ZERO);
        limiter.take(t0);
        let second = limiter.wait(t0);
        assert!(second > SECOND && second < 2 * SECOND, "{second:?}");
        assert_eq!(limiter.wait(t0), second, "asking again reserves nothing");
        let at = t0 + second;
        assert_eq!(limiter.wait(at), Duration::ZERO);
        limiter.take(at);
        let third = limiter.wait(at);
        assert!(
            third < second,
            "the rate grew along the curve: {third:?} < {second:?}"
        );
    }

    #[test]
    fn never_paces_below_the_minimum_rate_and_stands_down_when_idle() {
        let t0 = Instant::now();
        let mut limiter = Limiter::default();
        limiter.throttled(t0, t0, 0.0);
        assert_eq!(limiter.rate(t0), Some(MIN_RATE));
        assert!(limiter.is_engaged(t0 + IDLE - SECOND));
        assert!(!limiter.is_engaged(t0 + IDLE));
        assert_eq!(limiter.wait(t0 + IDLE), Duration::ZERO);
    }
}
