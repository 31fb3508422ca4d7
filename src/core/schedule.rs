//! Pluggable schedules: where the waits between retries come from.
//!
//! The built-in [`Backoff`] (exponential, full jitter) is what most callers need. A service that
//! already tunes its retries with another crate's schedules plugs one in with
//! [`ClientBuilder::schedule`](crate::ClientBuilder::schedule),
//! [`Call::schedule`](crate::Call::schedule) or
//! [`Delivering::schedule`](crate::webhook::Delivering::schedule).
//!
//! A schedule decides only the *backoff part* of a wait, the part [`Backoff`] would otherwise
//! draw. Whatever it returns, zero or [`Duration::MAX`] included, the engine still:
//! - never waits less than the server's `Retry-After` (plus its jitter): after a 429 the server's
//!   wait is the wait, after a 5xx it is a floor under the schedule's;
//! - waits at least [`Backoff::retry_after_fallback`] (plus jitter) after a 429 without a usable
//!   `Retry-After`, or the schedule's wait when that is longer;
//! - refuses a wait that would end past the call's [`Budget`](crate::Budget): the call stops at
//!   once with `budget_exhausted`, carrying the server's `Retry-After`;
//! - stops at [`Budget::max_attempts`](crate::Budget::max_attempts), and spends the shared
//!   [`RetryBudget`](crate::limit::RetryBudget) as before.
//!
//! Its waits are used as they are, recorded as [`WaitReason::Backoff`]: jitter is the schedule's
//! own business (backon's `with_jitter`, backoff's `randomization_factor`).
//!
//! # Why a fresh iterator per operation
//!
//! [`Schedule::start`] returns a new sequence of waits for each operation: the wait before its
//! first retry, then before its second, and so on; the sequence ending means "stop retrying", and
//! the call ends with the last answer's error, as when its attempts run out. That is the shape
//! both crates already have (a backon builder builds an `Iterator<Item = Duration>`; a `backoff`
//! schedule is reset and stepped), so each adapter is a few lines, and a schedule that keeps state
//! (a jitter generator, a count, a total delay, a start time) keeps it per operation, never shared
//! between the concurrent calls of a client. A stateless
//! `fn wait(&self, retry) -> Option<Duration>` would need no allocation, but it could hold such
//! state only behind a lock shared by every call.
//!
//! The trait is object-safe (a boxed iterator, not an associated type), so a client stores an
//! `Arc<dyn Schedule>` and stays one concrete type, with no type parameter for users to carry.
//! The one box per operation is allocated lazily, at its first retry: the happy path never
//! starts a schedule. The built-in [`Backoff`] is never boxed: the engine draws its waits
//! directly, allocation-free; its [`Schedule`] impl gives the same waits to code written over
//! any schedule.
//!
//! # Adapters, and why these dependencies
//!
//! Both are off by default; neither is in the default dependency tree.
//! - Feature `backon`: `BackonSchedule` for any `backon::BackoffBuilder`, such as
//!   `ExponentialBuilder`. backon is maintained, widely used and made for this job: its
//!   builders are schedules and nothing else. It is built without its default features (the
//!   engine sleeps on tokio, so none of backon's sleepers is needed) but with `std`, so that its
//!   jitter is seeded from the OS; without `std` every process would jitter alike.
//! - Feature `backoff`: `BackoffCrateSchedule` for any `backoff::backoff::Backoff`, such as
//!   `ExponentialBackoff`, only for users who already have its schedules. The crate is
//!   unmaintained (RUSTSEC-2025-0012) and pulls `instant` (unmaintained, RUSTSEC-2024-0384) and
//!   a second `rand` (0.8). Prefer [`Backoff`] or backon for new code.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use rand::Rng;

use crate::core::attempt::WaitReason;
use crate::core::backoff::Backoff;
use crate::core::matrix::Verdict;

#[cfg(feature = "backoff")]
mod backoff_crate;
#[cfg(feature = "backon")]
mod backon;

#[cfg(feature = "backoff")]
pub use self::backoff_crate::BackoffCrateSchedule;
#[cfg(feature = "backon")]
pub use self::backon::BackonSchedule;

/// Where the waits between the retries of an operation come from.
///
/// The engine starts a fresh sequence for each operation, at its first retry; each item is the
/// wait before the next retry; the sequence ending stops the retries, and the call ends with the
/// last answer's error, as when its attempts run out. Each retry the matrix answers with a wait
/// (429, 5xx, no answer, an awaited in-progress 409) draws one item, also when the server's
/// `Retry-After` wins; a 401's re-exchange draws none; retried token exchanges draw from a
/// sequence of their own.
///
/// A schedule sets only the backoff part of a wait, used as it is (jitter is the schedule's
/// own) and recorded as [`WaitReason::Backoff`]. Whatever it returns, zero or [`Duration::MAX`]
/// included, the engine never waits less than the server's `Retry-After`, waits at least
/// [`Backoff::retry_after_fallback`] after a 429 without one, and refuses a wait that would end
/// past the call's [`Budget`](crate::Budget), stopping at once with `budget_exhausted`.
///
/// A sequence per operation keeps a schedule's state (a jitter generator, a count, a total
/// delay, a start time) to that operation, never shared between the concurrent calls of a
/// client. Adapters for the `backon` and `backoff` crates are behind the features of those
/// names (`BackonSchedule`, `BackoffCrateSchedule`).
///
/// # Examples
///
/// Retry every 250 ms, at most three times (the budget's attempts may stop it earlier):
///
/// ```
/// use std::time::Duration;
/// use hodoflow_retry::{HodoflowClient, schedule::Schedule};
///
/// #[derive(Debug)]
/// struct Steady;
///
/// impl Schedule for Steady {
///     fn start(&self) -> Box<dyn Iterator<Item = Duration> + Send> {
///         Box::new(std::iter::repeat_n(Duration::from_millis(250), 3))
///     }
/// }
///
/// let waits: Vec<_> = Steady.start().collect();
/// assert_eq!(waits, [Duration::from_millis(250); 3]);
///
/// let client = HodoflowClient::builder("https://hodoflow.example")
///     .client_credentials("sender-1", "s3cr3t")
///     .schedule(Steady)
///     .build()?;
/// # let _ = client;
/// # Ok::<(), hodoflow_retry::Error>(())
/// ```
pub trait Schedule: Send + Sync {
    /// A fresh sequence of waits for one operation: the first item is the wait before its first
    /// retry. The sequence ending means "stop retrying".
    fn start(&self) -> Box<dyn Iterator<Item = Duration> + Send>;
}

/// The built-in schedule: [`Backoff::delay`] for retry 0, 1, 2 ... Never ends by itself.
impl Schedule for Backoff {
    fn start(&self) -> Box<dyn Iterator<Item = Duration> + Send> {
        let backoff = *self;
        let retries = (0..u32::MAX).chain(std::iter::repeat(u32::MAX));
        Box::new(retries.map(move |retry| backoff.delay(retry, &mut rand::rng())))
    }
}

/// A custom schedule as a policy holds it: shared by the clones of a client and its calls.
#[derive(Clone)]
pub(crate) struct SharedSchedule {
    schedule: Arc<dyn Schedule>,
    /// The schedule's type, for `Debug`: a schedule need not implement it.
    name: &'static str,
}

impl SharedSchedule {
    pub(crate) fn new<S: Schedule + 'static>(schedule: S) -> Self {
        Self {
            schedule: Arc::new(schedule),
            name: std::any::type_name::<S>(),
        }
    }
}

impl fmt::Debug for SharedSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Schedule")
            .field(&format_args!("{}", self.name))
            .finish()
    }
}

/// The waits of one operation (or of one run of token exchanges): the backoff's own, or those
/// of a custom schedule, started at the first draw.
pub(crate) struct Waits<'a> {
    backoff: Backoff,
    schedule: Option<&'a SharedSchedule>,
    started: Option<Box<dyn Iterator<Item = Duration> + Send>>,
}

impl fmt::Debug for Waits<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Waits")
            .field("backoff", &self.backoff)
            .field("schedule", &self.schedule)
            .field("started", &self.started.is_some())
            .finish()
    }
}

impl<'a> Waits<'a> {
    /// Waits by `backoff`, or by `schedule` when one is set; `backoff` keeps its
    /// [`retry_after_fallback`](Backoff::retry_after_fallback) either way.
    pub(crate) fn new(backoff: Backoff, schedule: Option<&'a SharedSchedule>) -> Self {
        Self {
            backoff,
            schedule,
            started: None,
        }
    }

    /// The backoff part of retry `retry` (0 for the first): the backoff's draw, or the custom
    /// schedule's next wait. `None` when the schedule has ended.
    pub(crate) fn backoff<R: Rng + ?Sized>(&mut self, retry: u32, rng: &mut R) -> Option<Duration> {
        match self.schedule {
            None => Some(self.backoff.delay(retry, rng)),
            Some(shared) => self
                .started
                .get_or_insert_with(|| shared.schedule.start())
                .next(),
        }
    }

    /// The wait before retry `retry` (0 for the first) after `verdict`, and why; `None` when the
    /// verdict does not retry or the schedule has ended. `Retry-After` and the fallback apply on
    /// top of the schedule's wait exactly as on the backoff's (see [`Backoff::wait`]).
    pub(crate) fn plan<R: Rng + ?Sized>(
        &mut self,
        verdict: Verdict,
        retry: u32,
        retry_after: Option<Duration>,
        rng: &mut R,
    ) -> Option<(Duration, WaitReason)> {
        match verdict {
            Verdict::RetryAfterBackoff | Verdict::RetryAfterServerWait
                if self.schedule.is_some() =>
            {
                let scheduled = self.backoff(retry, rng)?;
                self.backoff
                    .wait_with(verdict, retry_after, |_| scheduled, rng)
            }
            _ => self.backoff.wait(verdict, retry, retry_after, rng),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::error::ErrorKind;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    const MS: Duration = Duration::from_millis(1);

    #[derive(Debug)]
    struct Listed(Vec<Duration>);

    impl Schedule for Listed {
        fn start(&self) -> Box<dyn Iterator<Item = Duration> + Send> {
            Box::new(self.0.clone().into_iter())
        }
    }

    fn rng() -> StdRng {
        StdRng::seed_from_u64(0x5c4e)
    }

    #[test]
    fn a_custom_schedule_spaces_server_errors_with_its_own_waits_then_stops() {
        let shared = SharedSchedule::new(Listed(vec![30 * MS, Duration::ZERO, 7 * MS]));
        let mut waits = Waits::new(Backoff::new(), Some(&shared));
        let mut rng = rng();
        let planned: Vec<_> = (0..4)
            .map(|retry| waits.plan(Verdict::RetryAfterBackoff, retry, None, &mut rng))
            .collect();
        assert_eq!(
            planned,
            [
                Some((30 * MS, WaitReason::Backoff)),
                Some((Duration::ZERO, WaitReason::Backoff)),
                Some((7 * MS, WaitReason::Backoff)),
                None,
            ]
        );
    }

    #[test]
    fn retry_after_wins_over_a_schedule_that_says_zero() {
        let shared = SharedSchedule::new(Listed(vec![Duration::ZERO; 2]));
        let mut waits = Waits::new(Backoff::new(), Some(&shared));
        let mut rng = rng();
        let server = Duration::from_secs(1);
        for verdict in [Verdict::RetryAfterServerWait, Verdict::RetryAfterBackoff] {
            let (wait, reason) = waits
                .plan(verdict, 0, Some(server), &mut rng)
                .expect("retries");
            assert_eq!(reason, WaitReason::RetryAfter, "{verdict:?}");
            assert!(wait >= server && wait <= server + server / 10, "{wait:?}");
        }
    }

    #[test]
    fn a_429_without_retry_after_waits_the_fallback_over_a_shorter_schedule() {
        let shared = SharedSchedule::new(Listed(vec![MS, Duration::from_secs(9)]));
        let backoff = Backoff::new().retry_after_fallback(Duration::from_secs(2));
        let mut waits = Waits::new(backoff, Some(&shared));
        let mut rng = rng();
        let (wait, reason) = waits
            .plan(Verdict::RetryAfterServerWait, 0, None, &mut rng)
            .expect("retries");
        assert_eq!(reason, WaitReason::RetryAfterFallback);
        assert!(wait >= Duration::from_secs(2), "{wait:?}");
        let longer = waits.plan(Verdict::RetryAfterServerWait, 1, None, &mut rng);
        assert_eq!(longer, Some((Duration::from_secs(9), WaitReason::Backoff)));
    }

    #[test]
    fn a_reexchange_or_a_stop_draws_nothing_from_the_schedule() {
        let shared = SharedSchedule::new(Listed(vec![5 * MS]));
        let mut waits = Waits::new(Backoff::new(), Some(&shared));
        let mut rng = rng();
        let reexchange = waits.plan(Verdict::ReexchangeOnce, 0, None, &mut rng);
        assert_eq!(reexchange, Some((Duration::ZERO, WaitReason::Reexchange)));
        let stop = Verdict::Stop(ErrorKind::Forbidden);
        assert_eq!(waits.plan(stop, 0, None, &mut rng), None);
        assert_eq!(waits.plan(Verdict::Success, 0, None, &mut rng), None);
        let first = waits.plan(Verdict::RetryAfterBackoff, 0, None, &mut rng);
        assert_eq!(first, Some((5 * MS, WaitReason::Backoff)));
    }

    #[test]
    fn a_schedule_is_started_once_per_operation_and_only_when_drawn() {
        use std::sync::atomic::{AtomicU32, Ordering};

        #[derive(Debug, Default)]
        struct Counted(Arc<AtomicU32>);
        impl Schedule for Counted {
            fn start(&self) -> Box<dyn Iterator<Item = Duration> + Send> {
                self.0.fetch_add(1, Ordering::Relaxed);
                Box::new(std::iter::repeat(MS))
            }
        }

        let starts = Arc::new(AtomicU32::new(0));
        let shared = SharedSchedule::new(Counted(Arc::clone(&starts)));
        let mut rng = rng();
        let mut idle = Waits::new(Backoff::new(), Some(&shared));
        assert_eq!(idle.plan(Verdict::Success, 0, None, &mut rng), None);
        assert_eq!(
            starts.load(Ordering::Relaxed),
            0,
            "the happy path starts none"
        );
        let mut busy = Waits::new(Backoff::new(), Some(&shared));
        for retry in 0..3 {
            busy.plan(Verdict::RetryAfterBackoff, retry, None, &mut rng);
        }
        assert_eq!(starts.load(Ordering::Relaxed), 1);
        let mut next = Waits::new(Backoff::new(), Some(&shared));
        next.backoff(0, &mut rng);
        assert_eq!(starts.load(Ordering::Relaxed), 2, "each operation its own");
    }

    #[test]
    fn without_a_schedule_the_backoff_draws_as_before() {
        let backoff = Backoff::new().base(4 * MS).cap(16 * MS);
        let mut waits = Waits::new(backoff, None);
        let mut rng = rng();
        for retry in 0..10 {
            let (wait, reason) = waits
                .plan(Verdict::RetryAfterBackoff, retry, None, &mut rng)
                .expect("the backoff never ends");
            assert_eq!(reason, WaitReason::Backoff);
            assert!(wait <= backoff.ceiling(retry));
        }
    }

    #[test]
    fn the_backoff_as_a_schedule_draws_within_its_ceilings() {
        let backoff = Backoff::new().base(4 * MS).cap(16 * MS);
        let waits: Vec<_> = backoff.start().take(8).collect();
        assert_eq!(waits.len(), 8);
        for (retry, wait) in (0..).zip(waits) {
            assert!(wait <= backoff.ceiling(retry), "retry {retry}: {wait:?}");
        }
    }

    #[test]
    fn debug_names_the_schedule_type() {
        let shared = SharedSchedule::new(Listed(Vec::new()));
        let shown = format!("{shared:?}");
        assert!(
            shown.starts_with("Schedule(") && shown.contains("Listed"),
            "{shown}"
        );
    }
}
