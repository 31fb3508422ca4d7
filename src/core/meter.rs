//! Atomic figures of the `metrics` feature: a histogram of fixed buckets, and the attempt meter
//! the engine feeds once per attempt.
//!
//! The engine pays, per attempt, one clock read and a few relaxed atomic additions: no lock,
//! no allocation (a series is a slot of a fixed table, taken once by a compare-and-swap). Without
//! the feature none of this is compiled. The figures are read at scrape time by
//! `src/metrics/`, which alone knows the exposition format: this file names no format and no
//! crate for one.
//!
//! Cardinality is bounded by construction: a series is keyed by the request method (nine known
//! ones, else `_OTHER`) and the status code or transport error, at most [`SERIES`] of them per
//! client; past that, attempts fall into one `_OTHER` series. Nothing of the request's path,
//! identity, token or body is kept.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use http::Method;

use crate::core::answer::Answer;
use crate::core::attempt::TransportKind;

/// OpenTelemetry's advised bucket boundaries for `http.client.request.duration`, in seconds,
/// without its `0` (a bucket no duration falls in).
pub(crate) const HTTP_DURATION_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
];

/// The most (method, status or error) series one client keeps apart.
pub(crate) const SERIES: usize = 48;

/// The methods OpenTelemetry knows by name; any other is `_OTHER`.
const METHODS: [Method; 9] = [
    Method::GET,
    Method::HEAD,
    Method::POST,
    Method::PUT,
    Method::DELETE,
    Method::CONNECT,
    Method::OPTIONS,
    Method::TRACE,
    Method::PATCH,
];

/// OpenTelemetry's value for a method, or an error type, it does not know.
pub(crate) const OTHER: &str = "_OTHER";

/// A histogram of durations over fixed bucket boundaries, in seconds: counted with a few
/// relaxed atomic additions, read at each scrape
/// ([`Figures::histogram_seconds`](crate::metrics::Figures::histogram_seconds)).
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    /// One count per bucket (not cumulative), the last for values above every bound.
    buckets: Box<[AtomicU64]>,
    sum_nanos: AtomicU64,
}

/// What a histogram held when read.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HistogramSnapshot {
    /// `(upper bound, count in this bucket)`, not cumulative, the last bound `+Inf`.
    pub(crate) buckets: Vec<(f64, u64)>,
    /// Every observation: the sum of the buckets, so `+Inf` always equals it.
    pub(crate) count: u64,
    /// The sum of the observations, in seconds.
    pub(crate) sum: f64,
}

impl Histogram {
    /// An empty histogram over `bounds`, in seconds, increasing (Prometheus's `le`).
    pub fn new(bounds: &'static [f64]) -> Self {
        debug_assert!(bounds.windows(2).all(|pair| pair[0] < pair[1]));
        Self {
            bounds,
            buckets: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_nanos: AtomicU64::new(0),
        }
    }

    /// Counts one observation of `value`.
    pub fn observe(&self, value: Duration) {
        let seconds = value.as_secs_f64();
        // The first bucket whose bound is at least the value (Prometheus's `le`).
        let bucket = self.bounds.partition_point(|bound| *bound < seconds);
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(value.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// How many observations it counted.
    pub fn count(&self) -> u64 {
        self.buckets
            .iter()
            .map(|count| count.load(Ordering::Relaxed))
            .sum()
    }

    /// The buckets, count and sum now.
    pub(crate) fn snapshot(&self) -> HistogramSnapshot {
        let bounds = self.bounds.iter().copied().chain([f64::INFINITY]);
        let buckets: Vec<(f64, u64)> = bounds
            .zip(self.buckets.iter())
            .map(|(bound, count)| (bound, count.load(Ordering::Relaxed)))
            .collect();
        HistogramSnapshot {
            count: buckets.iter().map(|(_, count)| count).sum(),
            sum: Duration::from_nanos(self.sum_nanos.load(Ordering::Relaxed)).as_secs_f64(),
            buckets,
        }
    }
}

/// What an attempt came back with, as a series of the duration histogram tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The server answered with this status.
    Status(u16),
    /// No answer came back.
    Transport(TransportKind),
    /// Past [`SERIES`] distinct series: any method and outcome.
    Other,
}

/// The labels of one series: the method's name (or `_OTHER`) and the outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SeriesKey {
    pub(crate) method: &'static str,
    pub(crate) outcome: Outcome,
}

/// Attempts by status class, and their durations by method and status or transport error.
#[derive(Debug)]
pub(crate) struct AttemptMeter {
    /// 1xx, 2xx, 3xx, 4xx, 5xx, then no answer.
    classes: [AtomicU64; 6],
    /// Answers with 429 Too Many Requests.
    rate_limited: AtomicU64,
    series: Box<[Series]>,
    /// Attempts of a series past the table's [`SERIES`].
    overflow: Histogram,
}

#[derive(Debug)]
struct Series {
    /// `0`: free; else the packed method and outcome.
    key: AtomicU32,
    duration: Histogram,
}

/// Transport errors are packed above every status code.
const TRANSPORT_BASE: u32 = 1000;

impl Default for AttemptMeter {
    fn default() -> Self {
        Self {
            classes: Default::default(),
            rate_limited: AtomicU64::new(0),
            series: (0..SERIES)
                .map(|_| Series {
                    key: AtomicU32::new(0),
                    duration: Histogram::new(HTTP_DURATION_BUCKETS),
                })
                .collect(),
            overflow: Histogram::new(HTTP_DURATION_BUCKETS),
        }
    }
}

impl AttemptMeter {
    /// Counts an attempt of `method` that came back with `answer` after `took`.
    pub(crate) fn attempt(&self, method: &Method, answer: &Answer, took: Duration) {
        let outcome = match (answer.status(), answer.transport()) {
            (Some(status), _) => {
                let code = status.as_u16();
                let class = usize::from(code / 100).clamp(1, 5) - 1;
                self.classes[class].fetch_add(1, Ordering::Relaxed);
                if code == 429 {
                    self.rate_limited.fetch_add(1, Ordering::Relaxed);
                }
                u32::from(code)
            }
            (None, kind) => {
                self.classes[5].fetch_add(1, Ordering::Relaxed);
                let kind = kind.unwrap_or(TransportKind::Other);
                let index = TransportKind::ALL.iter().position(|k| *k == kind);
                TRANSPORT_BASE + index.unwrap_or(0) as u32
            }
        };
        let method = METHODS
            .iter()
            .position(|known| known == method)
            .unwrap_or(METHODS.len()) as u32;
        // Never 0: an outcome is at least 100.
        let key = method << 16 | outcome;
        self.histogram(key).observe(took);
    }

    /// The histogram of `key`: its slot, taken now if it is new, or the overflow.
    fn histogram(&self, key: u32) -> &Histogram {
        for series in self.series.iter() {
            let held = series.key.load(Ordering::Acquire);
            if held == key {
                return &series.duration;
            }
            if held == 0 {
                match series
                    .key
                    .compare_exchange(0, key, Ordering::AcqRel, Ordering::Acquire)
                {
                    Ok(_) => return &series.duration,
                    Err(taken) if taken == key => return &series.duration,
                    Err(_) => {}
                }
            }
        }
        &self.overflow
    }

    /// Attempts by status class: `[1xx, 2xx, 3xx, 4xx, 5xx, no answer]`.
    pub(crate) fn classes(&self) -> [u64; 6] {
        std::array::from_fn(|class| self.classes[class].load(Ordering::Relaxed))
    }

    /// Answers with 429 Too Many Requests.
    pub(crate) fn rate_limited(&self) -> u64 {
        self.rate_limited.load(Ordering::Relaxed)
    }

    /// Every series seen so far with its durations; the overflow last, if any attempt fell in.
    pub(crate) fn series(&self) -> Vec<(SeriesKey, HistogramSnapshot)> {
        let mut all: Vec<(SeriesKey, HistogramSnapshot)> = self
            .series
            .iter()
            .filter_map(|series| {
                let key = series.key.load(Ordering::Acquire);
                (key != 0).then(|| (unpack(key), series.duration.snapshot()))
            })
            .collect();
        let overflow = self.overflow.snapshot();
        if overflow.count > 0 {
            let key = SeriesKey {
                method: OTHER,
                outcome: Outcome::Other,
            };
            all.push((key, overflow));
        }
        all
    }
}

/// The labels of a packed key.
fn unpack(key: u32) -> SeriesKey {
    let method = METHODS
        .get((key >> 16) as usize)
        .map_or(OTHER, Method::as_str);
    let outcome = key & 0xffff;
    let outcome = match outcome.checked_sub(TRANSPORT_BASE) {
        Some(index) => TransportKind::ALL
            .get(index as usize)
            .map_or(Outcome::Other, |kind| Outcome::Transport(*kind)),
        None => Outcome::Status(outcome as u16),
    };
    SeriesKey { method, outcome }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use http::{HeaderMap, StatusCode};

    use super::*;

    fn answered(code: u16) -> Answer {
        let status = StatusCode::from_u16(code).unwrap();
        Answer::response(status, HeaderMap::new(), Bytes::new())
    }

    #[test]
    fn a_value_falls_in_the_first_bucket_whose_bound_it_does_not_pass() {
        let histogram = Histogram::new(&[0.1, 1.0]);
        histogram.observe(Duration::from_millis(100));
        histogram.observe(Duration::from_millis(101));
        histogram.observe(Duration::from_secs(3));
        let snapshot = histogram.snapshot();
        assert_eq!(
            snapshot.buckets,
            vec![(0.1, 1), (1.0, 1), (f64::INFINITY, 1)]
        );
        assert_eq!(snapshot.count, 3);
        assert!((snapshot.sum - 3.201).abs() < 1e-9, "{}", snapshot.sum);
    }

    #[test]
    fn attempts_are_counted_by_class_and_kept_apart_by_method_and_outcome() {
        let meter = AttemptMeter::default();
        let took = Duration::from_millis(20);
        meter.attempt(&Method::POST, &answered(202), took);
        meter.attempt(&Method::POST, &answered(429), took);
        meter.attempt(&Method::POST, &answered(429), took);
        meter.attempt(&Method::GET, &answered(503), took);
        let timeout = Answer::no_response(TransportKind::Timeout);
        meter.attempt(&Method::from_bytes(b"PURGE").unwrap(), &timeout, took);

        assert_eq!(meter.classes(), [0, 1, 0, 2, 1, 1]);
        assert_eq!(meter.rate_limited(), 2);
        let series = meter.series();
        let count = |method, outcome| {
            let key = SeriesKey { method, outcome };
            series
                .iter()
                .find(|(seen, _)| *seen == key)
                .map(|(_, histogram)| histogram.count)
        };
        assert_eq!(count("POST", Outcome::Status(202)), Some(1));
        assert_eq!(count("POST", Outcome::Status(429)), Some(2));
        assert_eq!(count("GET", Outcome::Status(503)), Some(1));
        let timeout = Outcome::Transport(TransportKind::Timeout);
        assert_eq!(count(OTHER, timeout), Some(1));
        assert_eq!(series.len(), 4);
    }

    #[test]
    fn series_past_the_table_fall_into_one_other_series() {
        let meter = AttemptMeter::default();
        for code in 200..200 + SERIES as u16 + 10 {
            meter.attempt(&Method::GET, &answered(code), Duration::from_millis(1));
        }
        let series = meter.series();
        assert_eq!(series.len(), SERIES + 1);
        let (key, overflow) = series.last().unwrap();
        assert_eq!(key.outcome, Outcome::Other);
        assert_eq!(overflow.count, 10);
    }
}
