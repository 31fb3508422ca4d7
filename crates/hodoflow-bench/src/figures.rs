//! Small statistics over measurements: medians, percentiles, and the herd's peak over mean.

use std::time::Duration;

/// The median of `values` (the mean of the middle two for an even count), or 0 when empty.
pub(crate) fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len().is_multiple_of(2) {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    } else {
        sorted[mid]
    }
}

/// The `p`-th percentile (0..=100) by the nearest-rank method, or 0 when empty.
pub(crate) fn percentile(values: &[f64], p: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Milliseconds, for reports.
pub(crate) fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// Rounds to `digits` decimals, so that reports stay readable.
pub(crate) fn round(value: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (value * scale).round() / scale
}

/// How bunched up arrivals are, as the herd scenario defines it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Bunching {
    /// The most arrivals in any window of the given width (a sliding window, starting at
    /// any arrival).
    pub(crate) peak: usize,
    /// Arrivals per window of that width on average over the span, first to last arrival.
    pub(crate) mean: f64,
    /// From the first arrival to the last.
    pub(crate) span: Duration,
}

impl Bunching {
    /// Measures `arrivals` (offsets on one clock, any order) with windows `width` wide.
    pub(crate) fn of(arrivals: &[Duration], width: Duration) -> Self {
        let mut sorted = arrivals.to_vec();
        sorted.sort();
        let (Some(first), Some(last)) = (sorted.first(), sorted.last()) else {
            return Self {
                peak: 0,
                mean: 0.0,
                span: Duration::ZERO,
            };
        };
        let span = *last - *first;
        let mut peak = 0;
        let mut end = 0;
        for (start, at) in sorted.iter().enumerate() {
            while end < sorted.len() && sorted[end] < *at + width {
                end += 1;
            }
            peak = peak.max(end - start);
        }
        // A span shorter than one window holds every arrival in one window.
        let windows = (span.as_secs_f64() / width.as_secs_f64()).max(1.0);
        Self {
            peak,
            mean: sorted.len() as f64 / windows,
            span,
        }
    }

    /// Peak over mean: 1.0 for arrivals spread perfectly evenly.
    pub(crate) fn ratio(&self) -> f64 {
        if self.mean == 0.0 {
            0.0
        } else {
            self.peak as f64 / self.mean
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_takes_the_middle_or_the_mean_of_the_middle_two() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }

    #[test]
    fn percentile_uses_the_nearest_rank() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&values, 50.0), 50.0);
        assert_eq!(percentile(&values, 99.0), 99.0);
        assert_eq!(percentile(&values, 100.0), 100.0);
        assert_eq!(percentile(&[7.0], 1.0), 7.0);
    }

    #[test]
    fn even_arrivals_have_a_ratio_near_one_and_a_burst_a_high_one() {
        let even: Vec<Duration> = (0..1000).map(Duration::from_millis).collect();
        let bunching = Bunching::of(&even, Duration::from_millis(100));
        assert_eq!(bunching.peak, 100);
        assert!((bunching.ratio() - 1.0).abs() < 0.01, "{bunching:?}");

        let mut burst = even.clone();
        burst.extend(std::iter::repeat_n(Duration::from_millis(500), 900));
        let bunching = Bunching::of(&burst, Duration::from_millis(100));
        assert_eq!(bunching.peak, 1000);
        assert!(bunching.ratio() > 5.0, "{bunching:?}");
    }
}
