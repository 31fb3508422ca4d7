//! Feature `backon`: backon's builders as a [`Schedule`].
//!
//! A backon builder already is a schedule: `build()` gives an `Iterator<Item = Duration>` that
//! ends when the builder's limits are reached. The adapter builds one per operation from a clone
//! of the builder, so the builder's state (jitter generator, attempt count, total delay) is never
//! shared between calls.

use std::time::Duration;

use ::backon::BackoffBuilder;

use crate::core::schedule::Schedule;

/// A backon builder (`backon::BackoffBuilder`, such as `ExponentialBuilder`,
/// `ConstantBuilder` or `FibonacciBuilder`) as a [`Schedule`]. Available with the feature
/// `backon`.
///
/// Each operation gets a backoff built from a clone of the builder, at its first retry. The
/// builder's `max_times` and `total_delay` stop the retries when reached (so does the call's
/// [`Budget`](crate::Budget), whichever comes first); `with_jitter` is the only jitter added to
/// its waits. `Retry-After`, [`Backoff::retry_after_fallback`](crate::Backoff::retry_after_fallback)
/// and the budget apply on top, as for any schedule.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use backon::ExponentialBuilder;
/// use hodoflow_retry::{HodoflowClient, schedule::BackonSchedule};
///
/// let exponential = ExponentialBuilder::default()
///     .with_min_delay(Duration::from_millis(200))
///     .with_max_delay(Duration::from_secs(5))
///     .with_max_times(4)
///     .with_jitter();
/// let client = HodoflowClient::builder("https://hodoflow.example")
///     .client_credentials("sender-1", "s3cr3t")
///     .schedule(BackonSchedule::new(exponential))
///     .build()?;
/// # let _ = client;
/// # Ok::<(), hodoflow_retry::Error>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct BackonSchedule<B> {
    builder: B,
}

impl<B: BackoffBuilder + Clone> BackonSchedule<B> {
    /// Waits as backoffs built from `builder` say.
    pub const fn new(builder: B) -> Self {
        Self { builder }
    }
}

impl<B> Schedule for BackonSchedule<B>
where
    B: BackoffBuilder + Clone + 'static,
    B::Backoff: 'static,
{
    fn start(&self) -> Box<dyn Iterator<Item = Duration> + Send> {
        Box::new(self.builder.clone().build())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ::backon::{ConstantBuilder, ExponentialBuilder};

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn each_operation_gets_a_fresh_backoff_from_the_builder() {
        let builder = ExponentialBuilder::default()
            .with_min_delay(10 * MS)
            .with_max_delay(80 * MS)
            .with_max_times(6)
            .with_jitter()
            .with_jitter_seed(7);
        let schedule = BackonSchedule::new(builder);
        let first: Vec<_> = schedule.start().collect();
        let second: Vec<_> = schedule.start().collect();
        assert_eq!(first, builder.build().collect::<Vec<_>>());
        assert_eq!(
            first, second,
            "no state carried from one operation to the next"
        );
        assert_eq!(first.len(), 6);
    }

    #[test]
    fn the_builders_max_times_ends_the_schedule() {
        let schedule = BackonSchedule::new(ConstantBuilder::default().with_delay(5 * MS));
        let waits: Vec<_> = schedule.start().collect();
        assert_eq!(waits, [5 * MS; 3], "backon's default: 3 times");
    }

    #[test]
    fn a_list_of_waits_is_a_builder_too() {
        let schedule = BackonSchedule::new([MS, 2 * MS].into_iter());
        assert_eq!(schedule.start().collect::<Vec<_>>(), [MS, 2 * MS]);
    }
}
