//! The retry bucket: AWS standard mode's tokens, a refill over time if asked, and Finagle's
//! floor of retries a second. One per [`RetryBudget`](super::RetryBudget), shared by every
//! service and every client the budget is given to: it bounds how much retrying they do
//! together, whatever fails.

use std::time::Duration;

use tokio::time::Instant;

/// The tokens of the bucket, with the refill due by the time they are read.
#[derive(Debug)]
pub(super) struct Bucket {
    pub(super) tokens: u32,
    /// The instant up to which the refill has been counted.
    refilled_at: Instant,
    pub(super) floor: Floor,
    /// The client's own calls, for the share of them the bucket and the floor may spend.
    pub(super) pace: Pace,
    /// Tokens spent so far, net of refunds.
    spent: u64,
}

impl Bucket {
    /// A full bucket of `capacity`, with a floor of `per_sec` retries a second, at `now`.
    pub(super) fn full(capacity: u32, per_sec: u32, now: Instant) -> Self {
        Self {
            tokens: capacity,
            refilled_at: now,
            floor: Floor {
                retries: f64::from(per_sec),
                at: now,
            },
            pace: Pace::new(now),
            spent: 0,
        }
    }

    /// The tokens the client may still spend now of its share: its calls since the pace's older
    /// mark (10 to 20 seconds ago, `calls` counted so far) earn one each, at least `least`,
    /// less what it spent since, net of refunds. A client with little traffic spends little,
    /// so a fleet of small clients spends together what one client of their summed traffic
    /// would. And it spends them no faster than it earns them: in any second, no more than an
    /// average second of its calls earns (at least `least`), so a fleet whose attempts all
    /// time out together does not spend 10 to 20 seconds of retries in one.
    pub(super) fn share_left(&mut self, now: Instant, calls: u64, least: u32) -> Share {
        let (earned, spent) = self.pace.since_older(now, calls, self.spent);
        let window = earned.max(u64::from(least)).saturating_sub(spent);
        let a_second = (self.pace.rate(now, calls) as u64).max(u64::from(least));
        let (this_second, next_second) = self.pace.this_second(now, self.spent);
        let second_left = a_second.saturating_sub(this_second);
        Share {
            left: window.min(second_left),
            next_second: (second_left < window).then_some(next_second),
            renews_in: self.pace.renews_in(now),
        }
    }

    /// Adds one token per `every` since the last refill, up to `capacity`. Time spent full is
    /// not banked for later.
    pub(super) fn refill(&mut self, every: Duration, capacity: u32, now: Instant) {
        // Full (a healthy client's usual state): as below, without its 128-bit division.
        if self.tokens >= capacity {
            self.tokens = capacity;
            self.refilled_at = now;
            return;
        }
        let elapsed = now.saturating_duration_since(self.refilled_at);
        let due = elapsed.as_nanos() / every.as_nanos();
        let due = u32::try_from(due).unwrap_or(u32::MAX);
        if self.tokens.saturating_add(due) >= capacity {
            self.tokens = capacity;
            self.refilled_at = now;
        } else {
            self.tokens += due;
            // `due` intervals fit in `elapsed`, so this stays at or before `now`.
            let counted = every.saturating_mul(due);
            self.refilled_at = self.refilled_at.checked_add(counted).unwrap_or(now);
        }
    }

    /// Takes `cost` tokens.
    pub(super) fn spend(&mut self, cost: u32) {
        self.tokens -= cost;
        self.spent += u64::from(cost);
    }

    /// Retries that spent `tokens` succeeded: they no longer count against the share.
    pub(super) fn refund(&mut self, tokens: u32) {
        self.spent = self.spent.saturating_sub(u64::from(tokens));
    }
}

/// What a client may still spend of its share of tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Share {
    /// The tokens.
    pub(super) left: u64,
    /// When the second's pace is what holds it to `left`: how long until the next second.
    pub(super) next_second: Option<Duration>,
    /// How long until the window renews (its older mark moves on, and the least share with it).
    pub(super) renews_in: Duration,
}

/// The retries a second that go with the bucket empty: a bucket of its own, refilled
/// continuously, holding one second's worth (at least one retry).
#[derive(Debug)]
pub(super) struct Floor {
    retries: f64,
    at: Instant,
}

impl Floor {
    /// The share of the client's own calls the floor lets retry a second: a tenth.
    pub(super) const SHARE: f64 = 0.1;

    /// Takes one retry if one is left by `now`, at `per_sec` retries a second (a second's worth
    /// kept, at least one), else says how long until one is.
    pub(super) fn take(&mut self, now: Instant, per_sec: f64) -> Result<(), Duration> {
        if per_sec <= 0.0 {
            return Err(Duration::MAX);
        }
        let since = now.saturating_duration_since(self.at).as_secs_f64();
        self.retries = (self.retries + since * per_sec).min(per_sec.max(1.0));
        self.at = now;
        if self.retries >= 1.0 {
            self.retries -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64(
                ((1.0 - self.retries) / per_sec).min(3600.0),
            ))
        }
    }
}

/// How many calls the client made lately, how fast, and what it spent meanwhile: counted from
/// a mark 10 to 20 seconds old, renewed every 10 seconds when the bucket is read, and what it
/// spent in the current second. A call only adds to an atomic count; this reads it under the
/// bucket's lock.
#[derive(Debug)]
pub(super) struct Pace {
    older: Mark,
    newer: Mark,
    /// The start of the current second (the first spend at least a second after the last
    /// one), and the tokens spent by then.
    second: (Instant, u64),
}

/// The counts at an instant.
#[derive(Debug, Clone, Copy)]
struct Mark {
    at: Instant,
    calls: u64,
    spent: u64,
}

impl Pace {
    /// How long a mark lasts.
    const WINDOW: Duration = Duration::from_secs(10);

    fn new(now: Instant) -> Self {
        let mark = Mark {
            at: now,
            calls: 0,
            spent: 0,
        };
        Self {
            older: mark,
            newer: mark,
            second: (now, 0),
        }
    }

    fn renew(&mut self, now: Instant, calls: u64, spent: u64) {
        if now.saturating_duration_since(self.newer.at) >= Self::WINDOW {
            self.older = self.newer;
            self.newer = Mark {
                at: now,
                calls,
                spent,
            };
        }
    }

    /// The calls, and the tokens spent, since the older mark.
    fn since_older(&mut self, now: Instant, calls: u64, spent: u64) -> (u64, u64) {
        self.renew(now, calls, spent);
        (
            calls.saturating_sub(self.older.calls),
            spent.saturating_sub(self.older.spent),
        )
    }

    /// How long until the marks move on.
    fn renews_in(&self, now: Instant) -> Duration {
        Self::WINDOW.saturating_sub(now.saturating_duration_since(self.newer.at))
    }

    /// The tokens spent in the current second (a new one starts when this is read a second or
    /// more after the current one's start), and how long until it ends.
    fn this_second(&mut self, now: Instant, spent: u64) -> (u64, Duration) {
        const SECOND: Duration = Duration::from_secs(1);
        let (start, spent_before) = &mut self.second;
        if now.saturating_duration_since(*start) >= SECOND {
            (*start, *spent_before) = (now, spent);
        }
        let ends_in = SECOND.saturating_sub(now.saturating_duration_since(*start));
        (spent.saturating_sub(*spent_before), ends_in)
    }

    /// Calls a second since the older mark (over one second at least).
    pub(super) fn rate(&mut self, now: Instant, calls: u64) -> f64 {
        let recent = calls.saturating_sub(self.older.calls);
        let secs = now.saturating_duration_since(self.older.at).as_secs_f64();
        recent as f64 / secs.max(1.0)
    }
}
