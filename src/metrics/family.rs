//! Writing one metric family through `prometheus-client`'s encoder: its `# HELP`, `# TYPE`
//! (and `# UNIT`) lines, then one sample line (or a histogram's lines) per label set.
//!
//! The crate's text encoder writes the suffixes OpenMetrics asks for (`_total` on a counter's
//! sample, `_bucket`, `_count`, `_sum` on a histogram's, `_seconds` from the unit), escapes label
//! values and ends the exposition with `# EOF`.

use std::fmt;

use prometheus_client::encoding::{
    DescriptorEncoder, EncodeCounterValue, EncodeGaugeValue, NoLabelSet,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;

use crate::core::meter::HistogramSnapshot;

/// One label: its name, and a value from a bounded set.
pub(super) type Label<'a> = (&'static str, &'a str);

/// The unit of every duration: the families' names end in `_seconds`.
pub(super) static SECONDS: Unit = Unit::Seconds;

/// A family's name, help text and unit.
#[derive(Debug, Clone, Copy)]
pub(super) struct Describe {
    /// Without the unit's suffix (the encoder appends `_seconds`), nor a counter's `_total`.
    pub(super) name: &'static str,
    pub(super) help: &'static str,
    pub(super) unit: Option<&'static Unit>,
}

/// A name and help text, without a unit.
pub(super) const fn plain(name: &'static str, help: &'static str) -> Describe {
    Describe {
        name,
        help,
        unit: None,
    }
}

/// A name and help text of a family in seconds.
pub(super) const fn seconds(name: &'static str, help: &'static str) -> Describe {
    Describe {
        name,
        help,
        unit: Some(&SECONDS),
    }
}

/// A family's series: each label set with its value.
pub(super) type Series<'a, V> = Vec<(Vec<Label<'a>>, V)>;

/// A counter family: one `{name}_total` sample per label set.
pub(super) fn counter<V: EncodeCounterValue>(
    out: &mut DescriptorEncoder<'_>,
    family: Describe,
    series: Series<'_, V>,
) -> fmt::Result {
    let mut metric = describe(out, family, MetricType::Counter)?;
    for (labels, value) in series {
        metric
            .encode_family(&labels.as_slice())?
            .encode_counter::<NoLabelSet, V, u64>(&value, None)?;
    }
    Ok(())
}

/// A gauge family: one sample per label set.
pub(super) fn gauge<V: EncodeGaugeValue>(
    out: &mut DescriptorEncoder<'_>,
    family: Describe,
    series: Series<'_, V>,
) -> fmt::Result {
    let mut metric = describe(out, family, MetricType::Gauge)?;
    for (labels, value) in series {
        metric
            .encode_family(&labels.as_slice())?
            .encode_gauge(&value)?;
    }
    Ok(())
}

/// A histogram family: `_sum`, `_count` and the cumulative `_bucket` lines per label set.
pub(super) fn histogram(
    out: &mut DescriptorEncoder<'_>,
    family: Describe,
    series: Series<'_, &HistogramSnapshot>,
) -> fmt::Result {
    let mut metric = describe(out, family, MetricType::Histogram)?;
    for (labels, snapshot) in series {
        metric
            .encode_family(&labels.as_slice())?
            .encode_histogram::<NoLabelSet>(
                snapshot.sum,
                snapshot.count,
                &snapshot.buckets,
                None,
            )?;
    }
    Ok(())
}

fn describe<'s>(
    out: &'s mut DescriptorEncoder<'_>,
    family: Describe,
    kind: MetricType,
) -> Result<prometheus_client::encoding::MetricEncoder<'s>, fmt::Error> {
    out.encode_descriptor(family.name, family.help, family.unit, kind)
}
