//! Feature `backoff`: the `backoff` crate's schedules as a [`Schedule`].
//!
//! Only for code that already has `backoff` schedules and wants to keep them. The crate is
//! unmaintained (RUSTSEC-2025-0012) and depends on `instant`, unmaintained too
//! (RUSTSEC-2024-0384), and on `rand` 0.8 beside this crate's 0.9; so the feature is off by
//! default and never in the default dependency tree. New code: [`Backoff`](crate::Backoff), or
//! backon behind the feature `backon`.
//!
//! A `backoff::backoff::Backoff` is a stateful schedule that is reset and stepped. The adapter
//! resets a clone of it per operation, so one call's progress never shows in another's waits.

use std::time::Duration;

use ::backoff::backoff::Backoff as BackoffCrateBackoff;

use crate::core::schedule::Schedule;

/// A schedule of the `backoff` crate (`backoff::backoff::Backoff`, such as
/// `backoff::ExponentialBackoff`) as a [`Schedule`]. Available with the feature `backoff`.
///
/// The `backoff` crate is unmaintained (RUSTSEC-2025-0012) and pulls `instant`
/// (RUSTSEC-2024-0384): use this only to keep schedules you already have.
///
/// The schedule must be `Clone`, as `ExponentialBackoff` is. Each operation gets a clone of it,
/// reset at its first retry, and waits what its
/// `next_backoff` says; `None` stops the retries. Its `max_elapsed_time` therefore counts from the
/// first retry, not the first send: the call's [`Budget`](crate::Budget) is the limit to rely on.
/// `Retry-After`, [`Backoff::retry_after_fallback`](crate::Backoff::retry_after_fallback) and the
/// budget apply on top, as for any schedule.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use backoff::ExponentialBackoffBuilder;
/// use hodoflow_retry::{HodoflowClient, schedule::BackoffCrateSchedule};
///
/// let exponential = ExponentialBackoffBuilder::new()
///     .with_initial_interval(Duration::from_millis(200))
///     .with_max_interval(Duration::from_secs(5))
///     .build();
/// let client = HodoflowClient::builder("https://hodoflow.example")
///     .client_credentials("sender-1", "s3cr3t")
///     .schedule(BackoffCrateSchedule::new(exponential))
///     .build()?;
/// # let _ = client;
/// # Ok::<(), hodoflow_retry::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct BackoffCrateSchedule<B> {
    schedule: B,
}

impl<B: BackoffCrateBackoff + Clone> BackoffCrateSchedule<B> {
    /// Waits as clones of `schedule`, each reset for its operation, say.
    pub const fn new(schedule: B) -> Self {
        Self { schedule }
    }
}

impl<B> Schedule for BackoffCrateSchedule<B>
where
    B: BackoffCrateBackoff + Clone + Send + Sync + 'static,
{
    fn start(&self) -> Box<dyn Iterator<Item = Duration> + Send> {
        let mut schedule = self.schedule.clone();
        schedule.reset();
        Box::new(std::iter::from_fn(move || schedule.next_backoff()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ::backoff::ExponentialBackoffBuilder;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn each_operation_starts_from_the_initial_interval() {
        let mut exponential = ExponentialBackoffBuilder::new()
            .with_initial_interval(10 * MS)
            .with_randomization_factor(0.0)
            .with_multiplier(2.0)
            .with_max_interval(40 * MS)
            .with_max_elapsed_time(None)
            .build();
        // Progress made before it was plugged in, or by another operation, does not carry over.
        exponential.next_backoff();
        exponential.next_backoff();
        let schedule = BackoffCrateSchedule::new(exponential);
        let waits: Vec<_> = schedule.start().take(5).collect();
        assert_eq!(waits, [10 * MS, 20 * MS, 40 * MS, 40 * MS, 40 * MS]);
        assert_eq!(schedule.start().take(5).collect::<Vec<_>>(), waits);
    }

    #[test]
    fn a_max_elapsed_time_that_has_passed_ends_the_retries() {
        let elapsed = ExponentialBackoffBuilder::new()
            .with_max_elapsed_time(Some(Duration::ZERO))
            .with_initial_interval(5 * MS)
            .build();
        let waits: Vec<_> = BackoffCrateSchedule::new(elapsed).start().collect();
        assert!(waits.is_empty(), "{waits:?}");
    }
}
