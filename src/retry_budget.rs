//! The retry budget: a token bucket shared by every call of a client.
//!
//! Why a budget and not only max attempts? Max attempts bounds one call; it does nothing for a
//! fleet. When the server degrades, every call retries up to its limit at once, so 500 calls with
//! 5 attempts each send 2,500 requests to a server that is already failing: the retries multiply
//! the load exactly when it can least be taken (a retry storm). Document 000 asks a sender to cap
//! attempts *and* to respect the credential's budget; the AWS SDKs' standard mode and gRPC's retry
//! throttling answer the same problem with a bucket of retry tokens, and so does this module.
//!
//! Every retry takes tokens ([`RetryBudget::RETRY_COST`], more after a timeout, which costs the
//! server most); a first-attempt success puts [`RetryBudget::SUCCESS_REWARD`] back, and a success
//! after retries refunds what its retries took. While the server is healthy the bucket stays
//! full and retries are free; when most calls fail it drains, and calls stop retrying with
//! [`ErrorKind::RetryBudgetExhausted`](crate::ErrorKind::RetryBudgetExhausted) instead of adding
//! load: in a total outage each call then costs one request, not five. First attempts are never
//! refused, so when the server recovers their successes refill the bucket.
//!
//! The defaults are AWS standard mode's: 500 tokens, 5 a retry, 10 a retry after a timeout.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::clock::{Clock, TokioClock};
use crate::error::{Error, Result};

/// A token bucket that caps the retries of every call sharing it.
///
/// Cheap to clone: clones share the bucket. A client and its clones share one; give the same
/// budget to several clients with [`ClientBuilder::retry_budget`](crate::ClientBuilder::retry_budget)
/// to cap them together.
///
/// # Examples
///
/// ```
/// use hodoflow_retry::{RetryBudget, RetryingClient};
///
/// let shared = RetryBudget::builder().capacity(200).build()?;
/// let orders = RetryingClient::builder("https://hodoflow.example")
///     .client_credentials("sender-1", "s3cr3t")
///     .retry_budget(shared.clone())
///     .build()?;
/// assert_eq!(shared.tokens(), Some(200));
/// # let _ = orders;
/// # Ok::<(), hodoflow_retry::Error>(())
/// ```
#[derive(Clone)]
pub struct RetryBudget {
    bucket: Option<Arc<Bucket>>,
}

impl RetryBudget {
    /// The default number of tokens when full: 500.
    pub const DEFAULT_CAPACITY: u32 = 500;
    /// The default cost of a retry: 5 tokens.
    pub const RETRY_COST: u32 = 5;
    /// The default cost of a retry after a timeout: 10 tokens.
    pub const TIMEOUT_RETRY_COST: u32 = 10;
    /// The default tokens put back by a success at the first attempt: 1.
    pub const SUCCESS_REWARD: u32 = 1;

    /// A full bucket with the default costs.
    pub fn new() -> Self {
        Self::builder()
            .build()
            .expect("the default retry budget is valid")
    }

    /// A builder for a bucket with other costs, a refill or an injected clock.
    pub fn builder() -> RetryBudgetBuilder {
        RetryBudgetBuilder::new()
    }

    /// No bucket: retries are capped only by each call's [`Budget`](crate::Budget).
    pub fn disabled() -> Self {
        Self { bucket: None }
    }

    /// Whether retries are capped by a bucket.
    pub fn is_enabled(&self) -> bool {
        self.bucket.is_some()
    }

    /// The tokens left now, or `None` when disabled.
    pub fn tokens(&self) -> Option<u32> {
        self.bucket.as_ref().map(|bucket| bucket.lock().tokens)
    }

    /// Takes the tokens of one retry, or refuses without taking any when too few are left.
    pub(crate) fn acquire(&self, after_timeout: bool) -> Result<u32, Refused> {
        let Some(bucket) = &self.bucket else {
            return Ok(0);
        };
        let cost = if after_timeout {
            bucket.config.timeout_retry_cost
        } else {
            bucket.config.retry_cost
        };
        let mut state = bucket.lock();
        if state.tokens < cost {
            return Err(Refused {
                left: state.tokens,
                cost,
            });
        }
        state.tokens -= cost;
        bucket.full.store(false, Ordering::Release);
        Ok(cost)
    }

    /// A call succeeded after its retries took `spent` tokens: refunds them, or rewards a
    /// first-attempt success.
    pub(crate) fn succeeded(&self, spent: u32) {
        let Some(bucket) = &self.bucket else {
            return;
        };
        if spent == 0 && bucket.full.load(Ordering::Acquire) {
            return;
        }
        let back = if spent == 0 {
            bucket.config.success_reward
        } else {
            spent
        };
        let mut state = bucket.lock();
        state.tokens = state
            .tokens
            .saturating_add(back)
            .min(bucket.config.capacity);
        bucket
            .full
            .store(state.tokens == bucket.config.capacity, Ordering::Release);
    }
}

impl Default for RetryBudget {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for RetryBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.bucket {
            Some(bucket) => f
                .debug_struct("RetryBudget")
                .field("tokens", &bucket.lock().tokens)
                .field("config", &bucket.config)
                .finish(),
            None => f.write_str("RetryBudget(disabled)"),
        }
    }
}

/// A retry the bucket could not pay for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Refused {
    pub(crate) left: u32,
    pub(crate) cost: u32,
}

/// Builds a [`RetryBudget`].
#[must_use]
#[derive(Debug)]
pub struct RetryBudgetBuilder {
    config: Config,
    clock: Arc<dyn Clock>,
}

#[derive(Debug, Clone, Copy)]
struct Config {
    capacity: u32,
    retry_cost: u32,
    timeout_retry_cost: u32,
    success_reward: u32,
    refill_every: Option<Duration>,
}

impl RetryBudgetBuilder {
    /// The defaults: 500 tokens, 5 a retry, 10 after a timeout, 1 back per first-attempt
    /// success, no refill over time, tokio's clock.
    pub fn new() -> Self {
        Self {
            config: Config {
                capacity: RetryBudget::DEFAULT_CAPACITY,
                retry_cost: RetryBudget::RETRY_COST,
                timeout_retry_cost: RetryBudget::TIMEOUT_RETRY_COST,
                success_reward: RetryBudget::SUCCESS_REWARD,
                refill_every: None,
            },
            clock: Arc::new(TokioClock),
        }
    }

    /// The tokens of a full bucket, and the tokens it starts with.
    ///
    /// Default: 500. At least the cost of one retry.
    pub fn capacity(mut self, tokens: u32) -> Self {
        self.config.capacity = tokens;
        self
    }

    /// The tokens a retry takes.
    ///
    /// Default: 5. At least 1.
    pub fn retry_cost(mut self, tokens: u32) -> Self {
        self.config.retry_cost = tokens;
        self
    }

    /// The tokens a retry after a timeout takes.
    ///
    /// Default: 10. At least 1.
    pub fn timeout_retry_cost(mut self, tokens: u32) -> Self {
        self.config.timeout_retry_cost = tokens;
        self
    }

    /// The tokens a success at the first attempt puts back.
    ///
    /// Default: 1.
    pub fn success_reward(mut self, tokens: u32) -> Self {
        self.config.success_reward = tokens;
        self
    }

    /// Puts one token back every `interval`, so a bucket drained by an outage refills even
    /// when no call succeeds, such as after a quiet night.
    ///
    /// Default: none (AWS standard mode refills only on success).
    pub fn refill_every(mut self, interval: Duration) -> Self {
        self.config.refill_every = Some(interval);
        self
    }

    /// Reads the time for the refill from `clock`.
    ///
    /// Default: [`TokioClock`].
    pub fn clock(mut self, clock: impl Clock + 'static) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Builds a full bucket.
    ///
    /// # Errors
    ///
    /// `invalid_input` when a cost is zero, the capacity is below a cost, or the refill
    /// interval is zero.
    pub fn build(self) -> Result<RetryBudget> {
        let config = self.config;
        if config.retry_cost == 0 || config.timeout_retry_cost == 0 {
            return Err(Error::invalid_input("a retry must cost at least one token"));
        }
        if config.capacity < config.retry_cost.max(config.timeout_retry_cost) {
            return Err(Error::invalid_input(
                "the retry budget's capacity must pay for at least one retry",
            ));
        }
        if config.refill_every.is_some_and(|every| every.is_zero()) {
            return Err(Error::invalid_input(
                "the retry budget's refill interval must be positive",
            ));
        }
        let now = self.clock.now();
        Ok(RetryBudget {
            bucket: Some(Arc::new(Bucket {
                config,
                clock: self.clock,
                state: Mutex::new(State {
                    tokens: config.capacity,
                    refilled_at: now,
                }),
                full: AtomicBool::new(true),
            })),
        })
    }
}

impl Default for RetryBudgetBuilder {
    fn default() -> Self {
        Self::new()
    }
}

#[derive(Debug)]
struct Bucket {
    config: Config,
    clock: Arc<dyn Clock>,
    state: Mutex<State>,
    /// Whether the bucket is full, so a first-attempt success (the common case) need not lock.
    full: AtomicBool,
}

#[derive(Debug)]
struct State {
    tokens: u32,
    /// The instant up to which the refill has been counted.
    refilled_at: Instant,
}

impl Bucket {
    /// The state, with the refill due by now already added.
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(every) = self.config.refill_every {
            let now = self.clock.now();
            let elapsed = now.saturating_duration_since(state.refilled_at);
            let due = elapsed.as_nanos() / every.as_nanos();
            let due = u32::try_from(due).unwrap_or(u32::MAX);
            if state.tokens.saturating_add(due) >= self.config.capacity {
                state.tokens = self.config.capacity;
                state.refilled_at = now;
            } else {
                state.tokens += due;
                state.refilled_at += every * due;
            }
        }
        state
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone)]
    struct ManualClock(Arc<Mutex<Instant>>);

    impl ManualClock {
        fn new() -> Self {
            Self(Arc::new(Mutex::new(Instant::now())))
        }

        fn advance(&self, by: Duration) {
            *self.0.lock().unwrap() += by;
        }
    }

    impl Clock for ManualClock {
        fn now(&self) -> Instant {
            *self.0.lock().unwrap()
        }
    }

    #[test]
    fn starts_full_with_the_aws_standard_defaults() {
        let budget = RetryBudget::new();
        assert_eq!(budget.tokens(), Some(500));
        assert_eq!(budget.acquire(false), Ok(5));
        assert_eq!(budget.acquire(true), Ok(10));
        assert_eq!(budget.tokens(), Some(485));
    }

    #[test]
    fn refuses_a_retry_it_cannot_pay_for_without_taking_tokens() {
        let budget = RetryBudget::builder().capacity(12).build().unwrap();
        assert_eq!(budget.acquire(false), Ok(5));
        assert_eq!(
            budget.acquire(true),
            Err(Refused { left: 7, cost: 10 }),
            "a timeout retry costs 10"
        );
        assert_eq!(budget.tokens(), Some(7), "a refusal takes nothing");
        assert_eq!(budget.acquire(false), Ok(5));
        assert_eq!(budget.acquire(false), Err(Refused { left: 2, cost: 5 }));
    }

    #[test]
    fn drains_after_capacity_over_cost_retries() {
        let budget = RetryBudget::new();
        let granted = std::iter::from_fn(|| budget.acquire(false).ok()).count();
        assert_eq!(granted, 100, "500 tokens at 5 a retry");
        assert_eq!(budget.tokens(), Some(0));
    }

    #[test]
    fn a_success_after_retries_refunds_what_they_took() {
        let budget = RetryBudget::new();
        let spent = budget.acquire(false).unwrap() + budget.acquire(true).unwrap();
        assert_eq!(budget.tokens(), Some(485));
        budget.succeeded(spent);
        assert_eq!(budget.tokens(), Some(500));
    }

    #[test]
    fn a_first_attempt_success_adds_one_up_to_the_capacity() {
        let budget = RetryBudget::new();
        budget.acquire(false).unwrap();
        budget.succeeded(0);
        assert_eq!(budget.tokens(), Some(496));
        for _ in 0..10 {
            budget.succeeded(0);
        }
        assert_eq!(budget.tokens(), Some(500), "never above the capacity");
    }

    #[test]
    fn refills_one_token_per_interval_on_the_injected_clock() {
        let clock = ManualClock::new();
        let budget = RetryBudget::builder()
            .capacity(10)
            .refill_every(Duration::from_secs(2))
            .clock(clock.clone())
            .build()
            .unwrap();
        budget.acquire(false).unwrap();
        budget.acquire(false).unwrap();
        assert_eq!(budget.tokens(), Some(0));
        clock.advance(Duration::from_secs(3));
        assert_eq!(budget.tokens(), Some(1), "one whole interval");
        clock.advance(Duration::from_secs(1));
        assert_eq!(budget.tokens(), Some(2), "the odd second was carried over");
        clock.advance(Duration::from_secs(3600));
        assert_eq!(budget.tokens(), Some(10), "capped at the capacity");
        budget.acquire(false).unwrap();
        clock.advance(Duration::from_secs(1));
        assert_eq!(
            budget.tokens(),
            Some(5),
            "time spent full is not banked for later"
        );
    }

    #[test]
    fn never_refills_without_a_refill_interval() {
        let clock = ManualClock::new();
        let budget = RetryBudget::builder().clock(clock.clone()).build().unwrap();
        budget.acquire(false).unwrap();
        clock.advance(Duration::from_secs(86_400));
        assert_eq!(budget.tokens(), Some(495));
    }

    #[test]
    fn clones_share_one_bucket() {
        let budget = RetryBudget::new();
        let clone = budget.clone();
        clone.acquire(false).unwrap();
        assert_eq!(budget.tokens(), Some(495));
    }

    #[test]
    fn a_disabled_budget_grants_every_retry_for_free() {
        let budget = RetryBudget::disabled();
        for _ in 0..1000 {
            assert_eq!(budget.acquire(true), Ok(0));
        }
        assert_eq!(budget.tokens(), None);
        assert!(!budget.is_enabled());
    }

    #[test]
    fn refuses_a_budget_that_cannot_pay_for_one_retry() {
        for builder in [
            RetryBudget::builder().retry_cost(0),
            RetryBudget::builder().timeout_retry_cost(0),
            RetryBudget::builder().capacity(9),
            RetryBudget::builder().refill_every(Duration::ZERO),
        ] {
            let error = builder.build().expect_err("invalid");
            assert_eq!(error.kind(), crate::ErrorKind::InvalidInput);
        }
    }
}
