//! reqwest 0.13.5's built-in retry, `reqwest::retry::for_host(..)` with a classifier that
//! retries 429, 5xx and no answer (as `crates/hodoflow-bench` sets it up). Defaults from
//! `src/retry.rs` (`Builder::scoped`): `max_retries_per_request` 2, no backoff (a retry goes at
//! once), and a budget of 20 % extra load: `tower` 0.5.3's `TpsBudget::new(10 s, 10, 0.2)`
//! (`src/retry/budget/tps_budget.rs`). That budget deposits 1 per success and withdraws
//! `1 / 0.2` = 5 per retry, over ten 1 s slots of a 10 s window, plus a constant reserve of
//! `min_per_sec * ttl * 5` = 500 (the floor: 10 retries a second). It never reads
//! `Retry-After`. reqwest has no default timeout, so attempts use the scenario's.

use std::sync::Mutex;
use std::time::Duration;

use super::{Next, Peer, Seen};
use crate::rng::Rng;

/// `TpsBudget`'s state: ten slots of one second and the slot being written.
#[derive(Debug)]
struct Tps {
    slots: [i64; 10],
    writer: i64,
    index: usize,
    since: f64,
}

impl Tps {
    const WINDOW: f64 = 1.0;
    const RESERVE: i64 = 10 * 10 * 5;
    const DEPOSIT: i64 = 1;
    const WITHDRAW: i64 = 5;

    fn expire(&mut self, now: f64) {
        let mut diff = now - self.since;
        if diff < Self::WINDOW {
            return;
        }
        self.slots[self.index] = std::mem::take(&mut self.writer);
        let mut index = (self.index + 1) % self.slots.len();
        let mut cleared = 0;
        while diff > Self::WINDOW && cleared < self.slots.len() {
            self.slots[index] = 0;
            diff -= Self::WINDOW;
            index = (index + 1) % self.slots.len();
            cleared += 1;
        }
        self.index = index;
        self.since = now;
    }

    fn deposit(&mut self, now: f64) {
        self.expire(now);
        self.writer += Self::DEPOSIT;
    }

    fn withdraw(&mut self, now: f64) -> bool {
        self.expire(now);
        let sum = self.writer + self.slots.iter().sum::<i64>() + Self::RESERVE;
        if sum >= Self::WITHDRAW {
            self.writer -= Self::WITHDRAW;
            true
        } else {
            false
        }
    }
}

/// reqwest's built-in retry, one budget per client (sender).
#[derive(Debug)]
pub(crate) struct ReqwestBuiltin {
    budget: Mutex<Tps>,
}

impl Default for ReqwestBuiltin {
    fn default() -> Self {
        ReqwestBuiltin {
            budget: Mutex::new(Tps {
                slots: [0; 10],
                writer: 0,
                index: 0,
                since: 0.0,
            }),
        }
    }
}

impl ReqwestBuiltin {
    /// `max_retries_per_request`.
    pub(crate) const MAX_RETRIES: u32 = 2;
}

impl Peer for ReqwestBuiltin {
    fn attempt_timeout(&self, scenario_timeout: Duration) -> Duration {
        scenario_timeout
    }

    fn next(&self, attempt: u32, seen: Seen, now: f64, _rng: &mut Rng) -> Next {
        let mut budget = self
            .budget
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if seen == Seen::Delivered {
            budget.deposit(now);
            return Next::Done;
        }
        if attempt > Self::MAX_RETRIES || !budget.withdraw(now) {
            return Next::GiveUp;
        }
        Next::Retry(Duration::ZERO)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_floor_allows_a_hundred_retries_in_ten_seconds_without_successes() {
        let peer = ReqwestBuiltin::default();
        let mut rng = Rng::derive(0, 0);
        let granted = (0..200)
            .filter(|_| peer.next(1, Seen::Timeout, 0.5, &mut rng) == Next::Retry(Duration::ZERO))
            .count();
        assert_eq!(granted, 100);
    }
}
