//! The SRE ratio: answered attempts and accepts over two minutes, in one-second buckets.
//!
//! The cost of a record or a read is bounded by the number of buckets, never by the history:
//! a bucket that falls out of the window is cleared and taken out of the running totals when
//! time moves past it.

use std::time::Duration;

use tokio::time::Instant;

/// The span of one bucket: whole seconds, so that a bucket's index is a division of whole
/// seconds (a division of nanoseconds is a 128-bit one, on every record and read).
pub(super) const BUCKET: Duration = Duration::from_secs(1);
const _: () = assert!(BUCKET.subsec_nanos() == 0 && BUCKET.as_secs() > 0);
/// Buckets kept: two minutes of history, as the SRE book suggests.
pub(super) const BUCKETS: usize = 120;
/// The short horizon, in buckets: the last five seconds, so a client that was healthy for two
/// minutes still sees an outage that began a few seconds ago.
pub(super) const SHORT: usize = 5;
/// SRE's K: a client sends up to K times what the server accepts before it throttles.
pub(super) const K: f64 = 2.0;
/// Fewer answered attempts than this in a horizon say nothing: a ratio of 0. Four, so a
/// sequential sender whose first call met four refusals in a row (and no accept in two minutes)
/// holds its next attempt and probes instead of spending it; a client with accepts in its history needs
/// three refusals for each accept to be down.
pub(super) const MIN_SAMPLE: u32 = 4;

/// Attempts answered (or lost) and attempts the server accepted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Counts {
    pub(super) requests: u32,
    pub(super) accepts: u32,
}

impl Counts {
    fn add(&mut self, other: Counts) {
        self.requests = self.requests.saturating_add(other.requests);
        self.accepts = self.accepts.saturating_add(other.accepts);
    }

    fn sub(&mut self, other: Counts) {
        self.requests = self.requests.saturating_sub(other.requests);
        self.accepts = self.accepts.saturating_sub(other.accepts);
    }

    /// Counts one answer, `accepted` or not.
    pub(super) fn count(&mut self, accepted: bool) {
        self.requests = self.requests.saturating_add(1);
        self.accepts = self.accepts.saturating_add(u32::from(accepted));
    }

    /// SRE's client-side throttling probability, `max(0, (requests - K * accepts) /
    /// (requests + 1))`; 0 below [`MIN_SAMPLE`].
    pub(super) fn ratio(self) -> f64 {
        if self.requests < MIN_SAMPLE {
            return 0.0;
        }
        let requests = f64::from(self.requests);
        ((requests - K * f64::from(self.accepts)) / (requests + 1.0)).max(0.0)
    }
}

/// A ring of [`BUCKETS`] buckets of [`BUCKET`] each.
#[derive(Debug)]
pub(super) struct History {
    origin: Instant,
    /// The absolute index (buckets since `origin`) of the newest bucket.
    newest: u64,
    buckets: [Counts; BUCKETS],
    total: Counts,
}

impl History {
    pub(super) fn new(origin: Instant) -> Self {
        Self {
            origin,
            newest: 0,
            buckets: [Counts::default(); BUCKETS],
            total: Counts::default(),
        }
    }

    /// The absolute bucket index of `now`; never moves back.
    fn index(&self, now: Instant) -> u64 {
        let since = now.saturating_duration_since(self.origin);
        (since.as_secs() / BUCKET.as_secs()).max(self.newest)
    }

    /// Moves the window to `now`, clearing every bucket time has left behind.
    fn advance(&mut self, now: Instant) {
        let index = self.index(now);
        let steps = (index - self.newest).min(BUCKETS as u64);
        for step in 1..=steps {
            let slot = ((self.newest + step) % BUCKETS as u64) as usize;
            let expired = std::mem::take(&mut self.buckets[slot]);
            self.total.sub(expired);
        }
        self.newest = index;
    }

    /// Counts one attempt that came back (or was lost) at `now`.
    pub(super) fn record(&mut self, now: Instant, accepted: bool) {
        self.advance(now);
        let one = Counts {
            requests: 1,
            accepts: u32::from(accepted),
        };
        self.buckets[(self.newest % BUCKETS as u64) as usize].add(one);
        self.total.add(one);
    }

    /// The whole window's counts.
    #[cfg(test)]
    pub(super) fn long(&mut self, now: Instant) -> Counts {
        self.advance(now);
        self.total
    }

    /// The counts of the last [`SHORT`] buckets, the current one included.
    #[cfg(test)]
    pub(super) fn short(&mut self, now: Instant) -> Counts {
        self.advance(now);
        self.recent()
    }

    /// [`short`](Self::short), the window already at now.
    fn recent(&self) -> Counts {
        let mut counts = Counts::default();
        for back in 0..SHORT as u64 {
            let Some(index) = self.newest.checked_sub(back) else {
                break;
            };
            counts.add(self.buckets[(index % BUCKETS as u64) as usize]);
        }
        counts
    }

    /// The throttling ratio now: the larger of the two horizons'.
    pub(super) fn ratio(&mut self, now: Instant) -> f64 {
        self.advance(now);
        self.total.ratio().max(self.recent().ratio())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(requests: u32, accepts: u32) -> Counts {
        Counts { requests, accepts }
    }

    #[test]
    fn the_ratio_is_zero_while_accepts_are_at_least_half_the_requests() {
        assert_eq!(counts(100, 50).ratio(), 0.0);
        assert_eq!(counts(100, 100).ratio(), 0.0);
        assert!((counts(100, 25).ratio() - 50.0 / 101.0).abs() < 1e-9);
        assert!((counts(100, 0).ratio() - 100.0 / 101.0).abs() < 1e-9);
    }

    #[test]
    fn too_few_requests_say_nothing() {
        assert_eq!(counts(MIN_SAMPLE - 1, 0).ratio(), 0.0);
        assert!(counts(MIN_SAMPLE, 0).ratio() >= 0.8);
    }

    #[test]
    fn forgets_what_is_older_than_two_minutes_at_a_cost_bounded_by_the_buckets() {
        let t0 = Instant::now();
        let mut window = History::new(t0);
        for _ in 0..1000 {
            window.record(t0, true);
        }
        assert_eq!(window.long(t0), counts(1000, 1000));
        let later = t0 + Duration::from_secs(60);
        window.record(later, false);
        assert_eq!(window.long(later), counts(1001, 1000));
        assert_eq!(
            window.short(later),
            counts(1, 0),
            "the short horizon is 5 s"
        );
        let gone = t0 + Duration::from_secs(120);
        assert_eq!(
            window.long(gone),
            counts(1, 0),
            "the first second left the window"
        );
        let far = t0 + Duration::from_secs(86_400 * 365);
        assert_eq!(window.long(far), Counts::default());
        assert_eq!(
            window.newest,
            86_400 * 365,
            "a year away costs 120 clears, not more"
        );
    }

    #[test]
    fn an_outage_after_long_health_shows_in_the_short_horizon_first() {
        let t0 = Instant::now();
        let mut window = History::new(t0);
        for second in 0..110 {
            for _ in 0..100 {
                window.record(t0 + Duration::from_secs(second), true);
            }
        }
        let outage = t0 + Duration::from_secs(115);
        for _ in 0..500 {
            window.record(outage, false);
        }
        assert_eq!(
            window.long(outage).ratio(),
            0.0,
            "11,000 accepts outweigh 500 failures"
        );
        assert!(window.short(outage).ratio() > 0.99);
        assert!(window.ratio(outage) > 0.99);
    }
}
