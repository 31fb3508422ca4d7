//! Figures of something beside the clients, read at each scrape: an outbox's, or your own.
//!
//! A [`Source`] reads its figures into [`Figures`] when [`Metrics::encode`](super::Metrics::encode)
//! runs; the families are written after the clients', through the same encoder, so a source
//! names, describes and labels its families as the SDK's own are (OpenMetrics text, `_total` on
//! counters, `_seconds` on durations) without depending on the encoder's crate.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use prometheus_client::encoding::DescriptorEncoder;

use crate::core::error::Result;
use crate::core::meter::{Histogram, HistogramSnapshot};

use super::family::{Label, counter, gauge, histogram, plain, seconds};

/// The future of [`Source::read`].
pub type SourceFuture<'a> = Pin<Box<dyn Future<Output = Result<Figures>> + Send + 'a>>;

/// Something whose figures a scrape reads beside the clients' (an outbox is one): add it with
/// [`Metrics::source`](super::Metrics::source).
pub trait Source: Send + Sync + fmt::Debug {
    /// Reads the figures now, for one scrape.
    ///
    /// # Errors
    ///
    /// What kept the figures from being read (a store that does not answer): the scrape fails
    /// rather than showing figures it could not see.
    fn read(&self) -> SourceFuture<'_>;
}

/// One series' labels: each name with its value. Every value comes from a bounded set (a state,
/// an outcome, a name chosen in code): never a token, a key, an ID, a path or a body.
type Labels = Vec<(&'static str, String)>;

/// The families one [`Source`] read for one scrape.
#[derive(Debug, Default)]
#[must_use]
pub struct Figures {
    families: Vec<Family>,
}

#[derive(Debug)]
struct Family {
    name: &'static str,
    help: &'static str,
    values: Values,
}

#[derive(Debug)]
enum Values {
    Counter(Vec<(Labels, u64)>),
    Gauge(Vec<(Labels, u64)>),
    Seconds(Vec<(Labels, f64)>),
    Histogram(Vec<(Labels, HistogramSnapshot)>),
}

impl Figures {
    /// No family yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// A counter family: `name` without `_total` (the encoder appends it), one sample per
    /// label set.
    pub fn counter(
        mut self,
        name: &'static str,
        help: &'static str,
        series: impl IntoIterator<Item = (Labels, u64)>,
    ) -> Self {
        self.push(name, help, Values::Counter(series.into_iter().collect()));
        self
    }

    /// A gauge family of counts, one sample per label set.
    pub fn gauge(
        mut self,
        name: &'static str,
        help: &'static str,
        series: impl IntoIterator<Item = (Labels, u64)>,
    ) -> Self {
        self.push(name, help, Values::Gauge(series.into_iter().collect()));
        self
    }

    /// A gauge family of durations: `name` without `_seconds` (the encoder appends it), one
    /// sample per label set.
    pub fn gauge_seconds(
        mut self,
        name: &'static str,
        help: &'static str,
        series: impl IntoIterator<Item = (Labels, Duration)>,
    ) -> Self {
        let series = series
            .into_iter()
            .map(|(labels, value)| (labels, value.as_secs_f64()))
            .collect();
        self.push(name, help, Values::Seconds(series));
        self
    }

    /// A histogram family of durations, each label set's [`Histogram`] as it is now: `name`
    /// without `_seconds`.
    pub fn histogram_seconds<'h>(
        mut self,
        name: &'static str,
        help: &'static str,
        series: impl IntoIterator<Item = (Labels, &'h Histogram)>,
    ) -> Self {
        let series = series
            .into_iter()
            .map(|(labels, histogram)| (labels, histogram.snapshot()))
            .collect();
        self.push(name, help, Values::Histogram(series));
        self
    }

    fn push(&mut self, name: &'static str, help: &'static str, values: Values) {
        self.families.push(Family { name, help, values });
    }

    /// Writes every family.
    pub(super) fn encode(&self, out: &mut DescriptorEncoder<'_>) -> fmt::Result {
        fn borrowed(labels: &Labels) -> Vec<Label<'_>> {
            labels
                .iter()
                .map(|(name, value)| (*name, value.as_str()))
                .collect()
        }
        for family in &self.families {
            let (name, help) = (family.name, family.help);
            match &family.values {
                Values::Counter(series) => counter(
                    out,
                    plain(name, help),
                    series.iter().map(|(l, v)| (borrowed(l), *v)).collect(),
                )?,
                Values::Gauge(series) => gauge(
                    out,
                    plain(name, help),
                    series.iter().map(|(l, v)| (borrowed(l), *v)).collect(),
                )?,
                Values::Seconds(series) => gauge(
                    out,
                    seconds(name, help),
                    series.iter().map(|(l, v)| (borrowed(l), *v)).collect(),
                )?,
                Values::Histogram(series) => histogram(
                    out,
                    seconds(name, help),
                    series.iter().map(|(l, v)| (borrowed(l), v)).collect(),
                )?,
            }
        }
        Ok(())
    }
}
