//! The send-rate limiter: AWS adaptive retry mode's CUBIC client rate limiter, engaged by a 429
//! that does not say when to come back, for the scope that 429 speaks for.
//!
//! A 429 without `Retry-After` (a reverse proxy's rate limit answers so) says "slower", not "until
//! when". The limiter then paces every attempt of that scope (a route's route for a webhook's
//! 429, the credential for the JSON:API's: the vendor's profile says which), first attempts
//! included, and no other scope, at a rate
//! that starts at [`BETA`] times the rate the client was sending at, and grows back along CUBIC's
//! curve `C * (t - k)^3 + w_max`, `k = cbrt(w_max * (1 - BETA) / C)`: fast while far below the
//! rate of the last throttle, flat near it, then probing above. Each further 429 for an attempt
//! sent after the last cut cuts again; 429s for attempts sent before it were caused by the old
//! rate and do not (TCP cuts once per window, for the same reason). After [`IDLE`] without a
//! throttle, the limiter stands down.

use std::time::Duration;

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::time::Instant;

use crate::core::limit::scope::{Scope, Signal};
use crate::core::limit::{Ask, Limiter, Refusal};
use crate::core::runtime;

/// The multiplicative decrease: AWS's 0.7.
pub(crate) const BETA: f64 = 0.7;
/// CUBIC's scaling constant, in requests per second per second cubed: AWS's 0.4.
pub(crate) const C: f64 = 0.4;
/// The slowest pace: one attempt every two seconds (AWS's minimum fill rate).
pub(crate) const MIN_RATE: f64 = 0.5;
/// The limiter stands down after this long without a throttle.
pub(crate) const IDLE: Duration = Duration::from_secs(120);

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
pub(super) struct Cubic {
    engaged: Option<Engaged>,
}

impl Cubic {
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
    /// apart at the slowest pace, and refused every later call at once, in the `blip_pool` bench.)
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

/// Scopes paced at once, at most; past this, the ones that stood down are forgotten.
const KEEP_SCOPES: usize = 1024;

/// Answers per second: the current second's and the last one's, weighted by how much of the
/// last one is still within a second of now.
#[derive(Debug)]
struct Measured {
    at: Instant,
    current: u32,
    previous: u32,
}

impl Measured {
    fn roll(&mut self, now: Instant) {
        let seconds = now.saturating_duration_since(self.at).as_secs();
        if seconds >= 2 {
            (self.previous, self.current) = (0, 0);
        } else if seconds == 1 {
            (self.previous, self.current) = (self.current, 0);
        }
        if seconds > 0 {
            self.at += Duration::from_secs(seconds);
        }
    }

    fn record(&mut self, now: Instant) {
        self.roll(now);
        self.current = self.current.saturating_add(1);
    }

    fn rate(&mut self, now: Instant) -> f64 {
        self.roll(now);
        let into = now.saturating_duration_since(self.at).as_secs_f64();
        f64::from(self.current) + f64::from(self.previous) * (1.0 - into)
    }
}

#[derive(Debug)]
struct State {
    measured: Measured,
    scopes: HashMap<Scope, Cubic>,
}

/// The send rates of one client, scope by scope: a CUBIC limiter for each scope a 429 without
/// `Retry-After` throttled, measured against the client's own answer rate.
#[derive(Debug)]
pub(crate) struct SendRates {
    state: Mutex<State>,
    /// Whether any scope is paced: when none, an attempt passes without taking the lock.
    engaged: AtomicBool,
}

impl Default for SendRates {
    fn default() -> Self {
        Self {
            state: Mutex::new(State {
                measured: Measured {
                    at: runtime::now(),
                    current: 0,
                    previous: 0,
                },
                scopes: HashMap::new(),
            }),
            engaged: AtomicBool::new(false),
        }
    }
}

impl SendRates {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The time between sends of the slowest paced scope now; `None` when none is paced.
    pub(crate) fn interval(&self) -> Option<Duration> {
        if !self.engaged.load(Ordering::Acquire) {
            return None;
        }
        let now = runtime::now();
        let mut state = self.lock();
        let slowest = state
            .scopes
            .values_mut()
            .filter_map(|cubic| cubic.rate(now))
            .reduce(f64::min)?;
        Some(Duration::from_secs_f64(1.0 / slowest.max(MIN_RATE)))
    }
}

impl Limiter for SendRates {
    /// When the attempt was let through, to tell a throttle caused by an older rate.
    type Permit = Instant;

    /// Waits for the next send slot of the attempt's scope, while a throttle paces it.
    async fn admit(&self, ask: &Ask<'_>) -> Result<Instant, Refusal> {
        let started = runtime::now();
        if !self.engaged.load(Ordering::Acquire) {
            return Ok(started);
        }
        loop {
            let now = runtime::now();
            let wait = {
                let mut state = self.lock();
                let Some(cubic) = state.scopes.get_mut(&ask.scope) else {
                    return Ok(now);
                };
                if !cubic.is_engaged(now) {
                    // Stood down: forgotten, and with the last one the lock is no longer taken.
                    state.scopes.remove(&ask.scope);
                    if state.scopes.is_empty() {
                        self.engaged.store(false, Ordering::Release);
                    }
                    return Ok(now);
                }
                let wait = cubic.wait(now);
                if wait.is_zero() {
                    cubic.take(now);
                    return Ok(now);
                }
                wait
            };
            let max_wait = ask.max_wait();
            if wait > max_wait {
                return Err(Refusal::past_budget(format!(
                    "{} is paced after a 429 without Retry-After, and its next send slot is {:.1}s away, past the {:.1}s this call has left to wait (it waited {:.1}s)",
                    ask.scope.label(),
                    wait.as_secs_f64(),
                    max_wait.as_secs_f64(),
                    now.saturating_duration_since(started).as_secs_f64()
                )));
            }
            runtime::sleep(wait).await;
        }
    }

    /// Counts the answer in the client's rate; a 429 without `Retry-After` cuts the rate of
    /// the scope it speaks for.
    fn heard(&self, sent_at: Instant, _: &Ask<'_>, signal: &Signal<'_>) {
        let now = runtime::now();
        let mut state = self.lock();
        state.measured.record(now);
        let Some(scope) = signal.throttles else {
            return;
        };
        let measured = state.measured.rate(now);
        if !state.scopes.contains_key(&scope) && state.scopes.len() >= KEEP_SCOPES {
            state.scopes.retain(|_, cubic| cubic.is_engaged(now));
        }
        // A throttle of an attempt sent before the scope's last cut was caused by the old rate
        // (`Cubic::throttled`).
        state
            .scopes
            .entry(scope)
            .or_default()
            .throttled(now, sent_at, measured);
        self.engaged.store(true, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn starts_at_beta_of_the_measured_rate_and_grows_back_along_the_cubic_curve() {
        let t0 = Instant::now();
        let mut limiter = Cubic::default();
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
        let mut limiter = Cubic::default();
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
        let mut limiter = Cubic::default();
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
        let mut limiter = Cubic::default();
        limiter.throttled(t0, t0, 0.0);
        assert_eq!(limiter.rate(t0), Some(MIN_RATE));
        assert!(limiter.is_engaged(t0 + IDLE - SECOND));
        assert!(!limiter.is_engaged(t0 + IDLE));
        assert_eq!(limiter.wait(t0 + IDLE), Duration::ZERO);
    }

    #[test]
    fn the_measured_rate_counts_about_the_last_second() {
        let t0 = Instant::now();
        let mut measured = Measured {
            at: t0,
            current: 0,
            previous: 0,
        };
        for _ in 0..60 {
            measured.record(t0 + Duration::from_millis(900));
        }
        let rate = measured.rate(t0 + Duration::from_millis(1500));
        assert!(
            (rate - 30.0).abs() < 1e-6,
            "half of the previous second: {rate}"
        );
        assert_eq!(measured.rate(t0 + Duration::from_secs(3)), 0.0);
    }
}
